"""GitHub's REST API in memory, behind github.Send: the refs, blobs, trees, commits, pulls and issues propose
makes and reads (tests/unit/test_propose.py, tests/carrying/test_propose_real.py)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any


class FakeGitHub:
    """The REST endpoints github.GitHub calls, in memory: refs, blobs, trees, commits, pulls, issues."""

    def __init__(self, branches: Mapping[str, str] | None = None, issues: list[dict[str, Any]] | None = None,
                 fail: int | None = None) -> None:
        self.refs = {"main": "c0", **(branches or {})}
        self.objects: dict[str, Any] = {"c0": {"tree": {"sha": "t0"}}}
        self.issues, self.pulls = list(issues or []), []  # type: ignore[var-annotated]
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    def send(self, method: str, url: str, body: Mapping[str, Any] | None) -> tuple[int, Any]:
        path = url.removeprefix("https://api.github.com/repos/o/r")
        self.calls.append((method, path))
        if self.fail:
            return self.fail, {"message": "Resource not accessible by integration"}
        if (method, path) == ("GET", ""):
            return 200, {"default_branch": "main"}
        if method == "GET" and path.startswith("/git/ref/heads/"):
            ref = path.removeprefix("/git/ref/heads/")
            return (200, {"object": {"sha": self.refs[ref]}}) if ref in self.refs else (404, {"message": "Not Found"})
        if method == "GET" and path.startswith("/git/commits/"):
            return 200, self.objects[path.removeprefix("/git/commits/")]
        if method == "POST" and path in ("/git/blobs", "/git/trees", "/git/commits"):
            sha = f"{path.rsplit('/', 1)[1]}{len(self.objects)}"
            self.objects[sha] = dict(body or {})
            return 201, {"sha": sha}
        if (method, path) == ("POST", "/git/refs"):
            assert body is not None
            self.refs[body["ref"].removeprefix("refs/heads/")] = body["sha"]
            return 201, {}
        if (method, path) in (("POST", "/pulls"), ("POST", "/issues")):
            made = self.pulls if path == "/pulls" else self.issues
            made.append({**(body or {}), "html_url": f"https://example.invalid/o/r{path}/{len(made) + 1}"})
            return 201, made[-1]
        if (method, path) == ("GET", "/issues?state=open&per_page=100"):
            return 200, self.issues
        raise AssertionError(f"unexpected call {method} {path}")

    def committed(self, branch: str) -> dict[str, bytes]:
        """The files of the one commit on branch, as its tree lists them."""
        commit = self.objects[self.refs[branch]]
        assert commit["parents"] == ["c0"]
        tree = self.objects[commit["tree"]]
        assert tree["base_tree"] == "t0"
        return {e["path"]: base64.b64decode(self.objects[e["sha"]]["content"]) for e in tree["tree"]}
