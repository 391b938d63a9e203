"""Enqueue documents from Python and follow them to the end (conveyor.Client).

    PYTHONPATH=clients/python python3 examples/python/producer.py redis://127.0.0.1:6379 [count]

Each document's idempotency key is its name, so running the script twice enqueues nothing new;
the script prints each job's result (or error), progress and log lines as the worker reports them.
"""

import sys

from conveyor import Client

QUEUE = "docs/read"


def main(url: str, count: int) -> int:
    client = Client.from_url(url)
    events = client.events(QUEUE)  # anchored before enqueueing: nothing is missed
    docs = [
        {"data": {"pages": [f"page one of doc {i}", "page two has five words"]}, "idempotency_key": f"doc-{i}.txt"}
        for i in range(count)
    ]
    docs.append({"data": {"pages": "not a list"}, "idempotency_key": "broken.txt", "attempts": 3})
    jobs = client.enqueue_many(QUEUE, docs)
    print(f"enqueued {sum(j.created for j in jobs)} new of {len(jobs)}; stats {client.stats(QUEUE)}")
    waiting = {j.id for j in jobs}
    for j in jobs:  # already finished (a second run): nothing to wait for
        job = client.get_job(j.id, QUEUE)
        if job and job.state in ("completed", "dead"):
            waiting.discard(j.id)
    for event in events if waiting else ():
        if event.id not in waiting:
            continue
        if event.type == "progress":
            print(f"{event.id}: {float(event.fields['progress']):.0%} {event.fields.get('message', '')}")
        elif event.type in ("completed", "dead"):
            waiting.discard(event.id)
            if not waiting:
                break
    failed = 0
    for j in jobs:
        job = client.get_job(j.id, QUEUE)
        assert job is not None
        # (a dead job's error is the handler's exception: its type, message and traceback)
        outcome = job.result if job.state == "completed" else f"{job.dead_reason} [{(job.error or {}).get('name')}]"
        failed += job.state != "completed"
        print(f"{j.id}: {job.state} {outcome}")
        for line in client.job_logs(j.id, QUEUE):
            print(f"    log: {line.message}")
    client.close()
    return 0 if failed <= 1 else 1  # the broken document is meant to fail


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379", int(sys.argv[2]) if len(sys.argv) > 2 else 3))
