"""A two-stage LLM-style pipeline with typed stages (docs/contracts.md):

    orgs/extract  extract(job, ctx)  {"text": "...", "source"?: "https://..."}  -> an organization record
    orgs/enrich   enrich(job, ctx)   the organization record                    -> {organization, slug, open_days, ...}

Each stage's contract (extract/contract.json, enrich/contract.json) is enforced by Conveyor: the
producer's data at enqueue, each result at settle, and extract's result against enrich's data
contract when it advances. The types come from those contracts (`conveyor contract types --file
extract/contract.json --lang python --out extract_types.py`).

`complete()` stands in for a language model and behaves like a careless one: its first answer
leaves out the contacts, which the contract requires. The worker refuses that result (a failed
attempt of kind invalid-result) and retries the job; the retry's `job.previous_errors` holds the
validation errors, which go into the next prompt, and the model repairs its answer.
"""

import json
import re
from typing import Any, Dict, List

from conveyor.handler import Context, Job

import enrich_types
import extract_types

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
PROMPT = """Extract the organization described below as JSON: name, description, services (each with its
weekly schedule: day, opens, closes), phones and contacts (name, email, role).
{feedback}
--- text ---
{text}"""


def extract(job: Job, ctx: Context) -> extract_types.Result:
    data: extract_types.Data = job.data
    feedback = feedback_from(job.previous_errors)
    if feedback:
        ctx.log(f"attempt {job.attempt}: repairing from {len(feedback)} previous error(s): {'; '.join(feedback)}")
    prompt = PROMPT.format(
        text=data["text"],
        feedback=("Your previous answer was rejected:\n" + "\n".join(f"- {f}" for f in feedback)) if feedback else "",
    )
    record = json.loads(complete(prompt))
    if "source" in data:
        record["source"] = data["source"]
    return record


def feedback_from(previous_errors: List[Dict[str, Any]]) -> List[str]:
    """One line per violation of the last refused result: what a model needs to fix its answer."""
    for error in reversed(previous_errors):
        if error.get("kind") != "invalid-result":
            continue
        details = error.get("details") or []
        if details:
            return [f"{d.get('pointer') or '(the whole value)'}: {d.get('message')} ({d.get('rule')})" for d in details]
        return [error.get("message", "")]
    return []


def enrich(job: Job, ctx: Context) -> enrich_types.Result:
    org: enrich_types.Data = job.data
    days = sorted({o["day"] for s in org["services"] for o in s["schedule"]}, key=DAYS.index)
    hours = sum(minutes(o["closes"]) - minutes(o["opens"]) for s in org["services"] for o in s["schedule"]) / 60
    ctx.log(f"{org['name']}: open {', '.join(days) or 'never'}")
    return {
        "organization": org,
        "slug": "-".join(re.findall(r"[a-z0-9]+", org["name"].lower())),
        "open_days": days,
        "weekly_hours": round(hours, 2),
        "emails": [c["email"] for c in org["contacts"]],
    }


def minutes(hhmm: str) -> int:
    h, m = hhmm.split(":")
    return int(h) * 60 + int(m)


# --- The model stand-in ----------------------------------------------------------------------

SERVICE = re.compile(r"^-\s*(?P<name>[^:]+):\s*(?P<times>.+)$")
OPENING = re.compile(r"(?P<day>Mon|Tue|Wed|Thu|Fri|Sat|Sun)\w*\s+(?P<opens>\d{1,2}:\d{2})\s*-\s*(?P<closes>\d{1,2}:\d{2})")
CONTACT = re.compile(r"^(?P<name>[^<]+?)\s*<(?P<email>[^>]+)>(?:,\s*(?P<role>.+))?$")


def complete(prompt: str) -> str:
    """A deterministic stand-in for a model call: reads the text after `--- text ---` and answers
    JSON. Like a hurried model it drops the contacts unless the prompt's feedback asks for them."""
    text = prompt.split("--- text ---\n", 1)[1]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    record: Dict[str, Any] = {"name": lines[0] if lines else "", "description": lines[1] if len(lines) > 1 else ""}
    services, phones, contacts = [], [], []
    section = ""
    for line in lines[2:]:
        if line.endswith(":") and not line.startswith("-"):
            section = line[:-1].lower()
        elif line.lower().startswith("phone:"):
            phones += [p.strip() for p in line.split(":", 1)[1].split(",") if p.strip()]
        elif line.lower().startswith("contact:"):
            m = CONTACT.match(line.split(":", 1)[1].strip())
            if m:
                contacts.append({k: v.strip() for k, v in m.groupdict().items() if v})
        elif section == "services" and (m := SERVICE.match(line)):
            schedule = [
                {"day": o["day"].lower(), "opens": o["opens"].zfill(5), "closes": o["closes"].zfill(5)}
                for o in OPENING.finditer(m["times"])
            ]
            services.append({"name": m["name"].strip(), "schedule": schedule})
    record["services"] = services
    record["phones"] = phones
    if "/contacts" in prompt:  # the feedback named them
        record["contacts"] = contacts
    return json.dumps(record)
