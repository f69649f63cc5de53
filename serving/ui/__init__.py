"""The web page (`/ui`): a person asks and sees what the assistant would get, browses the memory, corrects it
(edit as a newer version, rate a candidate, forget), and sees the loop and the store's health. Server-rendered
(Jinja2, plain forms, no script), in the same process as the API, under the same tokens and scopes: `session`
(who is asking: login cookie, CSRF), `pages` (what is read), `actions` (what is written), `render` (templates,
security headers, plots)."""
