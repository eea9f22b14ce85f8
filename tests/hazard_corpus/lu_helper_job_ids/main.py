# expect: lost-update scenario=two_submissions
# A job scheduler (scheduler.py) reads the next id, awaits the jobs table, then stores id + 1:
# two submissions get the same id.
import asyncio

from scheduler import Scheduler

submitted = []


async def client(sched, spec):
    job_id = await sched.submit(spec)
    submitted.append(job_id)


async def two_submissions():
    submitted.clear()
    sched = Scheduler()
    await asyncio.gather(client(sched, "backup"), client(sched, "report"))
    assert len(set(submitted)) == 2, f"duplicate job ids {submitted}"
