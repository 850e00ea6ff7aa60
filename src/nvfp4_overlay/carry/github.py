"""GitHub's REST API, the few calls `propose` makes: a branch with one commit, a pull request, an issue.

The one network call is `send` (urllib, the workflow's GITHUB_TOKEN); tests pass their own. The
commit is made with the git data API (blobs, a tree on the base branch's, a commit, a ref), so no git
checkout or push is needed where it runs.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, OverlayError

Send = Callable[[str, str, Mapping[str, Any] | None], tuple[int, Any]]  # (method, url, JSON body) -> (status, JSON)
API = "https://api.github.com"


@dataclass(frozen=True)
class Proposal:
    """What `propose` asks for: a pull request of `files` on `branch`, or an issue (files empty)."""

    kind: str  # "pull" or "issue"
    title: str
    body: str
    branch: str = ""
    files: Mapping[str, bytes] | None = None  # path in the repository -> content

    @property
    def pull(self) -> bool:
        return self.kind == "pull"


def urlopen_send(token: str) -> Send:
    """The real call: JSON over HTTPS with the token; HTTP errors come back as their status and body."""

    def send(method: str, url: str, body: Mapping[str, Any] | None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "nvfp4-overlay-propose"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (an https URL we build)
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text) if text else None
            except ValueError:
                return exc.code, {"message": text.decode("utf-8", "replace")}

    return send


class GitHub:
    """One repository: what is already proposed there, and opening a proposal."""

    def __init__(self, repo: str, send: Send, *, base: str | None = None, api: str = API) -> None:
        self.repo, self.send, self.base, self.api = repo, send, base, api.rstrip("/")

    @classmethod
    def from_environment(cls, repo: str | None, base: str | None) -> GitHub:
        """GITHUB_TOKEN, GITHUB_REPOSITORY and GITHUB_API_URL, as a workflow has them."""
        token = os.environ.get("GITHUB_TOKEN", "")
        repo = repo or os.environ.get("GITHUB_REPOSITORY", "")
        if not token or "/" not in repo:
            missing = "GITHUB_TOKEN" if not token else "the repository (GITHUB_REPOSITORY or --repo OWNER/NAME)"
            msg = f"propose: {missing} is not set"
            raise ConfigError(msg, item=missing, expected="set", found="unset",
                              fix="set GITHUB_TOKEN and GITHUB_REPOSITORY (the refresh workflow does), or pass "
                                  "--dry-run to only print")
        return cls(repo, urlopen_send(token), base=base, api=os.environ.get("GITHUB_API_URL") or API)

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None, *, ok: tuple[int, ...] = ()) -> Any:
        status, found = self.send(method, f"{self.api}/repos/{self.repo}{path}", body)
        if 200 <= status < 300 or status in ok:
            return found
        why = found.get("message", "") if isinstance(found, dict) else ""
        msg = f"GitHub {method} /repos/{self.repo}{path}: HTTP {status} {why}".rstrip()
        if status in (401, 403, 404):
            raise ConfigError(msg + "; the token needs contents, pull-requests and issues write permission",
                              item=f"{method} {path}", expected="2xx", found=str(status),
                              fix="grant the workflow those permissions (and let Actions open pull requests)")
        raise OverlayError(msg, item=f"{method} {path}", expected="2xx", found=str(status), fix="run it again")

    def existing(self, proposal: Proposal) -> str | None:
        """Where this proposal already is (its branch, or an open issue of its title), or None."""
        if proposal.pull:
            ref = urllib.parse.quote(proposal.branch, safe="/")
            found = self.call("GET", f"/git/ref/heads/{ref}", ok=(404,))
            return f"branch {proposal.branch}" if isinstance(found, dict) and "object" in found else None
        issues = self.call("GET", "/issues?state=open&per_page=100") or []
        return next((i["html_url"] for i in issues if i.get("title") == proposal.title), None)

    def open(self, proposal: Proposal) -> str:
        """Open the pull request (its files committed on a new branch) or the issue; its address."""
        if not proposal.pull:
            return str(self.call("POST", "/issues", {"title": proposal.title, "body": proposal.body})["html_url"])
        base = self.base or self.call("GET", "")["default_branch"]
        head = self.call("GET", f"/git/ref/heads/{urllib.parse.quote(base, safe='/')}")["object"]["sha"]
        tree = self.call("GET", f"/git/commits/{head}")["tree"]["sha"]
        entries = []
        for path, data in sorted((proposal.files or {}).items()):
            blob = self.call("POST", "/git/blobs", {"content": base64.b64encode(data).decode(), "encoding": "base64"})
            entries.append({"path": path, "mode": "100644", "type": "blob", "sha": blob["sha"]})
        new_tree = self.call("POST", "/git/trees", {"base_tree": tree, "tree": entries})["sha"]
        commit = self.call("POST", "/git/commits", {"message": proposal.title, "tree": new_tree, "parents": [head]})
        self.call("POST", "/git/refs", {"ref": f"refs/heads/{proposal.branch}", "sha": commit["sha"]})
        pull = self.call("POST", "/pulls", {"title": proposal.title, "head": proposal.branch, "base": base,
                                            "body": proposal.body})
        return str(pull["html_url"])
