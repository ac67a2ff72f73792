#!/usr/bin/env python3
"""Calls a running HIR server from Python: ingests an ad and a user's click, retrieves candidate
ads for the user with a filter and explanations, and prints the answer.

Needs requests (Debian: apt-get install python3-requests).

    HIR_URL=http://127.0.0.1:8080 HIR_API_KEY=KEY python3 examples/python/hir_example.py [USER_ID]
"""

import os
import sys
import time

import requests


class HIRError(Exception):
    """An RFC 9457 problem answered by the server."""

    def __init__(self, response):
        try:
            problem = response.json()
        except ValueError:
            problem = {"title": response.reason, "detail": response.text[:200]}
        self.status = response.status_code
        self.problem = problem
        self.retry_after = response.headers.get("Retry-After")
        super().__init__(f"{self.status} {problem.get('title')}: {problem.get('detail')}")


class HIR:
    """A small client of the HIR REST API (openapi.yaml describes every endpoint)."""

    def __init__(self, url, api_key=None, timeout=10):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Content-Type"] = "application/json"
        if api_key:
            self.session.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout

    def _call(self, method, path, body=None):
        r = self.session.request(method, self.url + path, json=body, timeout=self.timeout)
        if r.status_code >= 400:
            raise HIRError(r)
        return r.json()

    def post_entities(self, entities):
        return self._call("POST", "/v1/entities", {"entities": entities})

    def post_events(self, events):
        return self._call("POST", "/v1/events", {"events": events})

    def retrieve(self, **request):
        return self._call("POST", "/v1/retrieve", request)

    def model(self):
        return self._call("GET", "/v1/model")


def main():
    hir = HIR(os.environ.get("HIR_URL", "http://127.0.0.1:8080"), os.environ.get("HIR_API_KEY"))
    user = sys.argv[1] if len(sys.argv) > 1 else "u1"
    print(f"model {hir.model().get('version')}")

    ad = f"py-ad-{int(time.time())}"
    print("entities:", hir.post_entities([{"type": "ad", "id": ad, "text": "python example ad: trail running shoes",
                                           "attrs": {"status": "active"}}]))
    now = int(time.time() * 1000)
    events = [{"id": f"{ad}-click", "src": {"type": "user", "id": user}, "dst": {"type": "ad", "id": ad},
               "type": "click", "ts": now}]
    print("events:", hir.post_events(events))
    print("replayed:", hir.post_events(events))  # the same id and payload: counted as a duplicate

    try:  # an event outside the edge table: 400 naming the event and the rule
        hir.post_events([{"src": {"type": "ad", "id": ad}, "dst": {"type": "user", "id": user}, "type": "click", "ts": now}])
    except HIRError as e:
        print(f"refused as expected: {e} (item {e.problem.get('item')})")

    answer = hir.retrieve(user={"type": "user", "id": user}, k=5, explain=True,
                          filter={"attr": "status", "eq": "active"})
    print(f"retrieve for {user} (model {answer['model_version']}, fresh user {answer.get('fresh_user')}):")
    for c in answer["candidates"]:
        parts = c.get("parts", {})
        labels = ", ".join(t.get("label") or t["token"] for t in c.get("tokens", [])[:3])
        print(f"  {c['id']:>12}  score {c['score']:.3f}  (similarity {parts.get('similarity', 0):.3f}, "
              f"prior {parts.get('prior', 0):.3f}, co-engagement {parts.get('coengagement', 0):.3f})  {labels}")
    if not answer["candidates"]:
        sys.exit("no candidates")


if __name__ == "__main__":
    main()
