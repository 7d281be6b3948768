-- p99 latency vs batch size per frame: the recording cut into 5 s frames
-- (aligned to the wall clock, as reel's frames are), each with its request
-- count, p50/p99 end-to-end latency, the mean running batch and queue depth
-- the server reported (x-batch-size / x-queue-depth, recorded with
-- --context-header; -1 = not reported) and the share of long prompts; then,
-- on every row, the correlation across frames between p99 and batch size.
--
-- Reads the view `exchanges` (see README.md in this folder); DuckDB dialect.
WITH frames AS (
    SELECT time_bucket(INTERVAL 5 SECOND, ts)                              AS frame,
           count(*)                                                        AS requests,
           quantile_cont(duration_ns / 1e6, 0.5)                           AS p50_ms,
           quantile_cont(duration_ns / 1e6, 0.99)                          AS p99_ms,
           avg(batch_size) FILTER (WHERE batch_size >= 0)                  AS mean_batch,
           avg(queue_depth) FILTER (WHERE queue_depth >= 0)                AS mean_queue,
           avg(CASE WHEN prompt_tokens >= 2048 THEN 1.0 ELSE 0.0 END)      AS long_prompt_share
    FROM exchanges
    WHERE status BETWEEN 200 AND 399 AND error = ''
    GROUP BY frame
)
SELECT frame, requests, p50_ms, p99_ms, mean_batch, mean_queue, long_prompt_share,
       corr(p99_ms, mean_batch) OVER () AS corr_p99_batch
FROM frames
ORDER BY frame;
