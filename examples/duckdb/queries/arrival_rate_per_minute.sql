-- Arrival rate per minute: how many requests reached the gateway each
-- minute, as requests/s, with the gap between consecutive arrivals (a
-- bursty minute has a small median gap and a large p99 gap) and the share
-- of streaming requests.
--
-- Reads the view `exchanges` (see README.md in this folder); DuckDB dialect.
WITH arrivals AS (
    SELECT ts,
           stream,
           (ts_unix_ns - lag(ts_unix_ns) OVER (ORDER BY ts_unix_ns, recorder, seq)) / 1e6 AS gap_ms
    FROM exchanges
)
SELECT date_trunc('minute', ts)          AS minute,
       count(*)                          AS requests,
       count(*) / 60.0                   AS requests_per_s,
       quantile_cont(gap_ms, 0.5)        AS gap_p50_ms,
       quantile_cont(gap_ms, 0.99)       AS gap_p99_ms,
       avg(CASE WHEN stream THEN 1.0 ELSE 0.0 END) AS stream_share
FROM arrivals
GROUP BY minute
ORDER BY minute;
