"""Data mistakes the client catches before Redis: a str that holds a JSON object (json.dumps
output: the handler would get the string), and enqueue_many given bare data instead of jobs."""

import json
import warnings
from typing import Any

import pytest

from conveyor import Client, InvalidJobError, JSONStringDataWarning
from conveyor.aio import AsyncClient


def test_a_json_object_in_a_str_warns_naming_the_caller(client: Client) -> None:
    with pytest.warns(JSONStringDataWarning, match=r"job at index 0: data is a str holding a JSON object") as caught:
        job_id = client.enqueue("mail", json.dumps({"to": "a"}))
    assert caught[0].filename == __file__  # the warning points at the enqueue call
    assert client.get_job(job_id).data == '{"to": "a"}'  # still enqueued as given: a string
    with pytest.warns(JSONStringDataWarning, match=r"job j2: data is a str"):
        client.enqueue_many("mail", [{"data": 1}, {"data": ' {"to": "b"}', "id": "j2"}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails: these are no mistake
        for data in ("plain text", "{not json", "[1, 2]", '"quoted"', {"to": "a"}, "{}x"):
            client.enqueue("mail", data)


def test_a_flag_refuses_a_json_object_in_a_str(redis_url: str, r: Any) -> None:
    strict = Client.from_url(redis_url, refuse_json_strings=True)
    with pytest.raises(InvalidJobError, match=r"job at index 1: data is a str holding a JSON object"):
        strict.enqueue_many("mail", [{"data": 1}, {"data": json.dumps({"to": "a"})}])
    assert r.keys("*") == []
    strict.enqueue("mail", "plain text")
    strict.close()


async def _async_enqueue(redis_url: str) -> None:
    c = AsyncClient.from_url(redis_url, refuse_json_strings=True)
    try:
        with pytest.raises(InvalidJobError, match="data is a str holding a JSON object"):
            await c.enqueue("mail", '{"to": "a"}')
    finally:
        await c.close()
    c = AsyncClient.from_url(redis_url)
    try:
        with pytest.warns(JSONStringDataWarning) as caught:
            await c.enqueue("mail", '{"to": "a"}')
        assert caught[0].filename == __file__
    finally:
        await c.close()


def test_the_async_client_checks_the_same(redis_url: str, r: Any) -> None:
    import asyncio

    asyncio.run(_async_enqueue(redis_url))


def test_enqueue_many_with_bare_data_says_what_a_job_is(client: Client, r: Any) -> None:
    with pytest.raises(InvalidJobError, match=r'job at index 0: .*each job is a mapping \{"data": …'):
        client.enqueue_many("mail", [{"to": "a", "subject": "hi"}])
    with pytest.raises(InvalidJobError, match=r'job at index 0: data is required: each job is a mapping \{"data": …'):
        client.enqueue_many("mail", [{"priority": 3}])
    with pytest.raises(InvalidJobError, match=r'job at index 1 must be a mapping \{"data": ….*got int'):
        client.enqueue_many("mail", [{"data": 1}, 2])
    with pytest.raises(InvalidJobError, match=r"enqueue_many takes a list of jobs"):
        client.enqueue_many("mail", {"data": 1})  # type: ignore[arg-type]
    assert r.keys("*") == []
