"""Enqueue texts into the org-extract pipeline (handlers.py) and print what became of each.

    PYTHONPATH=../../clients/python:. python3 enqueue.py redis://127.0.0.1:6379

The queue's contract checks each job's data here, before anything is written: a job that breaks
it raises ContractViolation naming the job, the JSON pointer and the rule. Each job keeps its id
from stage to stage; the last text has no contact, so the model cannot repair its answer and the
job ends dead, its errors and rejected result kept (`conveyor job <id>` shows them).
"""

import sys
import time

from conveyor import Client

import extract_types

TEXTS = {
    "riverside-food-bank": """Riverside Food Bank
Free groceries and hot meals for families in the Riverside district.
Services:
- Food parcels: Mon 09:00-12:00, Wed 14:00-17:00
- Hot meals: Fri 18:00-20:00
Phone: +44 20 7946 0018, +44 20 7946 0019
Contact: Ana Silva <ana@riverside-food.example>, coordinator
""",
    "hillside-legal-clinic": """Hillside Legal Clinic
Free legal advice on housing, debt and employment.
Services:
- Drop-in advice: Tue 10:00-13:00, Thu 10:00-13:00
- Appointments: Sat 9:30-12:30
Phone: 020 7946 0300
Contact: Tom Reyes <tom@hillside-legal.example>, solicitor
Contact: Front desk <desk@hillside-legal.example>
""",
    "corner-notice": """Community Fridge
Take what you need, leave what you can.
Services:
- Fridge: Mon 08:00-20:00, Sun 08:00-20:00
""",
}


def main(url: str) -> int:
    client = Client.from_url(url)
    jobs: list[tuple[str, extract_types.Data]] = [
        (key, {"text": text, "source": f"https://directory.example/{key}"}) for key, text in TEXTS.items()
    ]
    enqueued = client.enqueue_many("orgs/extract", [{"id": key, "data": data, "attempts": 3} for key, data in jobs])
    print(f"enqueued {len(enqueued)} into orgs/extract")
    pending = {key for key, _ in jobs}
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        for key in sorted(pending):
            job = client.get_job(key, "orgs/extract")
            finished = job and (job.state in ("dead", "cancelled") or (job.queue, job.state) == ("orgs/enrich", "completed"))
            if finished:
                pending.discard(key)
                attempts = ", ".join(f"{s.queue} {s.attempts}" for s in job.stages)
                outcome = job.result if job.state == "completed" else job.error
                print(f"{key}: {job.state} (attempts: {attempts}) {outcome}")
        time.sleep(0.1)
    client.close()
    return 1 if pending else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379"))
