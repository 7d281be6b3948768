-- Prefix-sharing ratio from prefix_hashes: of all prompt prefix blocks, the
-- share whose hash an earlier request already had — the prefill a perfect
-- prefix cache would skip. prefix_hashes is a keyed chain (block k's hash
-- covers blocks 1..k), so a block repeats only when the whole prefix up to
-- it does, and "seen before" is total blocks minus distinct hashes.
-- request_share is the share of requests whose first block was seen before.
-- The same figures as `reel stats` (Prefix sharing). Hashes match across
-- recorders only when they share the redaction key.
--
-- Reads the view `exchanges` (see README.md in this folder); DuckDB dialect.
WITH requests AS (
    SELECT prefix_hashes FROM exchanges WHERE len(prefix_hashes) > 0
),
blocks AS (
    SELECT unnest(prefix_hashes) AS h FROM requests
),
firsts AS (
    SELECT count(*) AS requests, count(DISTINCT prefix_hashes[1]) AS distinct_first FROM requests
)
SELECT firsts.requests                                        AS requests,
       count(*)                                               AS blocks,
       count(DISTINCT h)                                      AS distinct_blocks,
       count(*) - count(DISTINCT h)                           AS reused_blocks,
       (count(*) - count(DISTINCT h)) / count(*)              AS ratio,
       (firsts.requests - firsts.distinct_first) / firsts.requests AS request_share
FROM blocks, firsts
GROUP BY firsts.requests, firsts.distinct_first;
