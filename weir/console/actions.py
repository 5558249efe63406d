"""The console's actions (only with ``--allow-actions``) and their login.

* ``POST /api/elect``: preferred leader election (ElectLeaders, KIP-460) of some partitions
  or all;
* ``POST /api/reassign``: one partition's new replicas (AlterPartitionReassignments,
  KIP-455);
* ``POST /api/topics``: CreateTopics; ``POST /api/topics/{name}/delete``: DeleteTopics;
  ``POST /api/topics/{name}/config``: IncrementalAlterConfigs (SET / DELETE, KIP-339);
* ``POST /api/groups/{group}/reset-offsets``: kafka-consumer-groups.sh ``--reset-offsets``
  for one topic, a dry run unless ``execute`` is true (OffsetCommit, only while the group has
  no active member, as Kafka's tool requires).

Each answers a readable result: per resource ``null`` or Kafka's error name and message.

A console listening beyond loopback asks for a login before any action (``POST
/api/login``): a password from ``--password-file`` (``user=password`` lines, a bare line
being user ``admin``'s), else the cluster's SCRAM users (the login is a SASL/SCRAM
authentication against a broker).  The session is a random token in an HttpOnly,
SameSite=Strict cookie; actions take JSON bodies only, which a cross-site form cannot send.
"""

from __future__ import annotations

import datetime
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from kio.index import load_request_schema

from weir.console.admin import AdminError, ConsoleAdmin, error_text
from weir.console.state_key import STATE_KEY
from weir.protocol import codec

COOKIE = "weir_console_session"
SESSION_S = 12 * 3600
TIMEOUT = datetime.timedelta(seconds=15)


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_password_file(path: str | Path) -> dict[str, str]:
    """``user=password`` lines (``#`` comments); a line without ``=`` is ``admin``'s."""
    users = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition("=")
        if sep:
            users[user.strip()] = password
        else:
            users["admin"] = line
    if not users:
        raise ValueError(f"{path} holds no password")
    return users


@dataclass
class Auth:
    """Who may run actions: nobody needs a login on loopback; elsewhere a password file's
    users or the cluster's SCRAM users."""

    required: bool
    passwords: dict[str, str] | None = None
    admin: ConsoleAdmin | None = None
    sessions: dict[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def method(self) -> str | None:
        if not self.required:
            return None
        if self.passwords is not None:
            return "password file"
        if self._scram_mechanism() is not None:
            return "cluster SCRAM users"
        return None

    def _scram_mechanism(self) -> str | None:
        security = getattr(self.admin, "security", None)
        mechanism = getattr(security, "mechanism", None)
        return mechanism if mechanism and mechanism.startswith("SCRAM-") else None

    async def check(self, user: str, password: str) -> bool:
        if self.passwords is not None:
            expected = self.passwords.get(user)
            return expected is not None and hmac.compare_digest(expected.encode(),
                                                                password.encode())
        mechanism = self._scram_mechanism()
        if mechanism is None or self.admin is None:
            return False
        from weir.protocol.client import BrokerConnection
        from weir.security.client import AuthenticationError, InterBrokerSecurity

        base = self.admin.security
        security = InterBrokerSecurity(base.protocol, base.ssl_context, mechanism, user,
                                       password)
        broker = await self.admin.any_broker()
        host, port = self.admin.brokers[broker]
        conn = BrokerConnection(host, port, client_id="weir-console-login", security=security)
        try:
            await conn.connect(timeout_s=self.admin.timeout_s)
        except AuthenticationError:
            return False
        finally:
            await conn.close()
        return True

    def login(self, user: str) -> str:
        token = secrets.token_urlsafe(32)
        self.sessions[token] = (user, time.monotonic() + SESSION_S)
        return token

    def user(self, request: web.Request) -> str | None:
        if not self.required:
            return "local"
        found = self.sessions.get(request.cookies.get(COOKIE, ""))
        if found is None or found[1] < time.monotonic():
            return None
        return found[0]


def _state(request: web.Request) -> Any:
    return request.app[STATE_KEY]


def _auth(state: Any) -> Auth:
    return state.auth or Auth(required=False)


def _refused(request: web.Request) -> web.Response | None:
    state = _state(request)
    if not state.allow_actions:
        return web.json_response(
            {"error": "actions are disabled; start the console with --allow-actions"},
            status=403)
    if _auth(state).user(request) is None:
        return web.json_response({"error": "log in to run actions"}, status=401)
    return None


async def _json_body(request: web.Request, fields: tuple[str, ...] | None = None
                     ) -> dict[str, Any]:
    """The request's JSON object; with ``fields``, a name outside them is refused (400): a
    misspelt field must not be read as absent (for ElectLeaders, absent means every
    partition of the cluster)."""
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="expected a JSON body") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="expected a JSON object")
    unknown = sorted(set(body) - set(fields)) if fields is not None else []
    if unknown:
        raise web.HTTPBadRequest(text=f"unknown field(s) {', '.join(map(repr, unknown))}; "
                                      f"expected {', '.join(fields or ())}")
    return body


def _bad(text: str) -> web.Response:
    return web.json_response({"error": text}, status=400)


def _failed(what: str, exc: BaseException) -> web.Response:
    return web.json_response({"error": f"{what} failed: {exc}"}, status=502)


# -- login ------------------------------------------------------------------------------------


async def api_session(request: web.Request) -> web.Response:
    state = _state(request)
    auth = _auth(state)
    return web.json_response({"allow_actions": state.allow_actions,
                              "login_required": auth.required, "method": auth.method,
                              "user": auth.user(request)})


async def api_login(request: web.Request) -> web.Response:
    state = _state(request)
    auth = _auth(state)
    try:
        body = await _json_body(request)
    except web.HTTPBadRequest as exc:
        return _bad(exc.text or "bad body")
    user, password = body.get("username"), body.get("password")
    if not isinstance(user, str) or not isinstance(password, str) or not user:
        return _bad("expected {username: str, password: str}")
    if not auth.required:
        return web.json_response({"user": "local"})
    if auth.method is None:
        return web.json_response({"error": "no login is configured: start the console with "
                                           "--password-file (or on a SCRAM cluster)"},
                                 status=403)
    try:
        ok = await auth.check(user, password)
    except (AdminError, ConnectionError, TimeoutError, OSError) as exc:
        return _failed("login", exc)
    if not ok:
        return web.json_response({"error": "wrong username or password"}, status=401)
    response = web.json_response({"user": user})
    response.set_cookie(COOKIE, auth.login(user), httponly=True, samesite="Strict",
                        max_age=SESSION_S)
    return response


async def api_logout(request: web.Request) -> web.Response:
    _auth(_state(request)).sessions.pop(request.cookies.get(COOKIE, ""), None)
    response = web.json_response({"user": None})
    response.del_cookie(COOKIE)
    return response


# -- partitions --------------------------------------------------------------------------------


def parse_partitions(body: dict[str, Any]) -> list[tuple[str, int]] | None:
    """``{"partitions": [{"topic", "partition"}]}`` → pairs; absent → None (all)."""
    raw = body.get("partitions")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError("partitions must be a list")  # noqa: TRY004 - a 400 answer
    out = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str) \
                or not isinstance(entry.get("partition"), int):
            raise ValueError(  # noqa: TRY004 - a 400 answer
                "each partition needs a topic (string) and partition (int)")
        out.append((entry["topic"], entry["partition"]))
    return out


async def api_elect(request: web.Request) -> web.Response:
    refused = _refused(request)
    if refused is not None:
        return refused
    try:
        partitions = parse_partitions(await _json_body(request, ("partitions",)))
    except (ValueError, web.HTTPBadRequest) as exc:
        return _bad(getattr(exc, "text", None) or str(exc))
    topics: dict[str, list[int]] = {}
    for t, p in partitions or []:
        topics.setdefault(t, []).append(p)
    request_ = codec.build(load_request_schema(43, 2), election_type=0, timeout=TIMEOUT,
                           topic_partitions=None if partitions is None else [
                               {"topic": t, "partitions": ps} for t, ps in topics.items()])
    try:
        response = await _state(request).admin.to_controller(request_)
    except (AdminError, ConnectionError, TimeoutError) as exc:
        return _failed("ElectLeaders", exc)
    err = error_text(response.error_code)
    if err:
        return web.json_response({"error": f"ElectLeaders: {err}"}, status=502)
    return web.json_response({"results": {
        f"{r.topic}-{int(p.partition_id)}": error_text(p.error_code, p.error_message)
        for r in response.replica_election_results for p in r.partition_result}})


async def api_reassign(request: web.Request) -> web.Response:
    refused = _refused(request)
    if refused is not None:
        return refused
    try:
        body = await _json_body(request, ("topic", "partition", "replicas"))
    except web.HTTPBadRequest as exc:
        return _bad(exc.text or "bad body")
    topic, partition, replicas = body.get("topic"), body.get("partition"), body.get("replicas")
    if not isinstance(topic, str) or not isinstance(partition, int) \
            or not isinstance(replicas, list) or not replicas \
            or not all(isinstance(r, int) for r in replicas):
        return _bad("expected {topic: str, partition: int, replicas: [int, ...]}")
    if len(set(replicas)) != len(replicas):
        return _bad(f"replicas name a broker twice: {replicas}")
    request_ = codec.build(load_request_schema(45, 0), timeout=TIMEOUT, topics=[
        {"name": topic, "partitions": [{"partition_index": partition, "replicas": replicas}]}])
    try:
        response = await _state(request).admin.to_controller(request_)
    except (AdminError, ConnectionError, TimeoutError) as exc:
        return _failed("AlterPartitionReassignments", exc)
    err = error_text(response.error_code, response.error_message)
    if err:
        return web.json_response({"error": f"AlterPartitionReassignments: {err}"}, status=502)
    return web.json_response({"results": {
        f"{t.name}-{int(p.partition_index)}": error_text(p.error_code, p.error_message)
        for t in response.responses for p in t.partitions}})


# -- topics ------------------------------------------------------------------------------------


def _configs(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in raw.items()):
        raise ValueError("configs must map names to string values")
    return raw


async def api_create_topic(request: web.Request) -> web.Response:
    refused = _refused(request)
    if refused is not None:
        return refused
    try:
        body = await _json_body(request, ("name", "partitions", "replication_factor", "configs"))
        configs = _configs(body.get("configs"))
    except (ValueError, web.HTTPBadRequest) as exc:
        return _bad(getattr(exc, "text", None) or str(exc))
    name, partitions = body.get("name"), body.get("partitions", -1)
    factor = body.get("replication_factor", -1)
    if not isinstance(name, str) or not name or not isinstance(partitions, int) \
            or not isinstance(factor, int):
        return _bad("expected {name: str, partitions: int, replication_factor: int, "
                    "configs: {name: value}}")
    request_ = codec.build(load_request_schema(19, 7), timeout=TIMEOUT, validate_only=False,
                           topics=[{"name": name, "num_partitions": partitions,
                                    "replication_factor": factor, "assignments": [],
                                    "configs": [{"name": k, "value": v}
                                                for k, v in configs.items()]}])
    try:
        response = await _state(request).admin.to_controller(request_)
    except (AdminError, ConnectionError, TimeoutError) as exc:
        return _failed("CreateTopics", exc)
    return web.json_response({"results": {
        t.name: error_text(t.error_code, t.error_message) for t in response.topics}})


async def api_delete_topic(request: web.Request) -> web.Response:
    refused = _refused(request)
    if refused is not None:
        return refused
    name = request.match_info["name"]
    request_ = codec.build(load_request_schema(20, 6), timeout=TIMEOUT,
                           topics=[{"name": name, "topic_id": None}])
    try:
        response = await _state(request).admin.to_controller(request_)
    except (AdminError, ConnectionError, TimeoutError) as exc:
        return _failed("DeleteTopics", exc)
    return web.json_response({"results": {
        t.name or name: error_text(t.error_code, t.error_message)
        for t in response.responses}})


async def api_alter_topic_config(request: web.Request) -> web.Response:
    refused = _refused(request)
    if refused is not None:
        return refused
    name = request.match_info["name"]
    try:
        body = await _json_body(request, ("set", "delete"))
        sets = _configs(body.get("set"))
        deletes = body.get("delete") or []
        if not isinstance(deletes, list) or not all(isinstance(k, str) for k in deletes):
            raise ValueError("delete must be a list of config names")
    except (ValueError, web.HTTPBadRequest) as exc:
        return _bad(getattr(exc, "text", None) or str(exc))
    if not sets and not deletes:
        return _bad("nothing to change: give set {name: value} or delete [name]")
    entries = [{"name": k, "config_operation": 0, "value": v} for k, v in sets.items()]
    entries += [{"name": k, "config_operation": 1, "value": None} for k in deletes]
    request_ = codec.build(load_request_schema(44, 1), validate_only=False, resources=[
        {"resource_type": 2, "resource_name": name, "configs": entries}])
    try:
        response = await _state(request).admin.to_any(request_)
    except (AdminError, ConnectionError, TimeoutError) as exc:
        return _failed("IncrementalAlterConfigs", exc)
    return web.json_response({"results": {
        r.resource_name: error_text(r.error_code, r.error_message)
        for r in response.responses}})


def add_routes(app: web.Application) -> None:
    """The actions' routes (``weir.console.group_reset.add_routes`` adds reset-offsets)."""
    app.router.add_get("/api/session", api_session)
    app.router.add_post("/api/login", api_login)
    app.router.add_post("/api/logout", api_logout)
    app.router.add_post("/api/elect", api_elect)
    app.router.add_post("/api/reassign", api_reassign)
    app.router.add_post("/api/topics", api_create_topic)
    app.router.add_post("/api/topics/{name}/delete", api_delete_topic)
    app.router.add_post("/api/topics/{name}/config", api_alter_topic_config)
