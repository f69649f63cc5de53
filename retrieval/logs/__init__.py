"""The two logs the service keeps in Postgres: the feedback log, every query with its candidates, what
was shown and used, and its typed export split by query text (`feedback`, contract 3), which a lab run
keeps apart in a scratch schema of its own (`scratch`); and the deployment log, which selector version
the services must run and what each did about it (`deployments`)."""
