-- Prompt-length distribution by hour: quantiles of prompt_tokens and a
-- histogram in the length buckets `reel report` uses (short < 512 ≤ medium
-- < 2048 ≤ long < 8192 ≤ very long). prompt_tokens_source says whether the
-- count came from the server's usage or reel's estimate; rows without a
-- known prompt length (non-LLM routes) are left out.
--
-- Reads the view `exchanges` (see README.md in this folder); DuckDB dialect.
SELECT date_trunc('hour', ts)                               AS hour_start,
       count(*)                                             AS requests,
       quantile_cont(prompt_tokens, 0.5)                    AS p50_tokens,
       quantile_cont(prompt_tokens, 0.9)                    AS p90_tokens,
       quantile_cont(prompt_tokens, 0.99)                   AS p99_tokens,
       max(prompt_tokens)                                   AS max_tokens,
       count(*) FILTER (WHERE prompt_tokens < 512)          AS short,
       count(*) FILTER (WHERE prompt_tokens >= 512 AND prompt_tokens < 2048)  AS medium,
       count(*) FILTER (WHERE prompt_tokens >= 2048 AND prompt_tokens < 8192) AS long,
       count(*) FILTER (WHERE prompt_tokens >= 8192)        AS very_long,
       avg(CASE WHEN prompt_tokens_source = 'usage' THEN 1.0 ELSE 0.0 END) AS from_usage_share
FROM exchanges
WHERE prompt_tokens > 0
GROUP BY hour_start
ORDER BY hour_start;
