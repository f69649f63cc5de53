-- Exposure (DESIGN.md contract 3): what the consumer was shown, and how likely it was to be shown.
-- A candidate that was not shown has no label: the consumer never saw it, so it is never a negative.
ALTER TABLE query_candidates
    ADD COLUMN served_rank integer,  -- its place in the served order the context was cut from; NULL: not in it
    ADD COLUMN shown       boolean,  -- in the context given to the consumer; NULL: logged before exposure was
    ADD COLUMN propensity  real;     -- P(shown) under the serving policy, exploration included; NULL: before
