# expect: check-then-act scenario=duplicate_failure_reports
# A retry queue (retry.py) must schedule each failed job once; two failure reports of the same
# job both pass the membership check.
import asyncio

from retry import RetryQueue

reports = []


async def on_failure(rq, job_id, attempt):
    reports.append(job_id)
    return await rq.schedule(job_id, attempt)


async def duplicate_failure_reports():
    reports.clear()
    rq = RetryQueue()
    await asyncio.gather(on_failure(rq, "job-7", 1), on_failure(rq, "job-7", 1))
    assert rq.queue.count("job-7") == 1, f"job scheduled {rq.queue.count('job-7')} times"
