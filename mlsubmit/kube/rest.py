"""The Kubernetes REST calls mlsubmit makes for core and batch objects, through the official client's ApiClient (the
kubeconfig's server, TLS, token and timeouts; refusals as its ApiException), answered as the plain JSON objects the
API server sends.

Why not the typed CoreV1Api and BatchV1Api: importing them builds some 600 pydantic model classes, 1.1 CPU-s in
every `mlsubmit train --target kubernetes` and `mlsubmit jobs … --api kubernetes` process (measured 2026-12-07 on a
2-core machine: `from kubernetes.client import CoreV1Api, BatchV1Api, CustomObjectsApi, ApisApi` 1.6 CPU-s, the
last two alone 0.5), while mlsubmit reads a few fields of each object. Custom objects (JobSets, TFJobs) go through
the client's CustomObjectsApi, which answers dicts as well.

    rest = Rest(api_client)
    rest.list("pods", "default", label_selector="mlsubmit.dev/job=x")["items"]   # dicts, as `kubectl get -o json`
"""

from __future__ import annotations

import json
from typing import Any

GROUPS = {"namespaces": "/api/v1", "pods": "/api/v1", "services": "/api/v1", "configmaps": "/api/v1",
          "jobs": "/apis/batch/v1"}


def path(plural: str, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    """`/api/v1/namespaces/NS/pods/NAME/log` and the like (name and namespace are RFC 1123 names: no quoting)."""
    parts = [GROUPS[plural], *(["namespaces", namespace] if namespace else []), plural, *([name] if name else []),
             *([sub] if sub else [])]
    return "/".join(parts)


class Rest:
    """GET, list, create and delete of core and batch objects, as dicts (see the module docstring)."""

    def __init__(self, api_client: Any):
        self.api = api_client

    def request(self, method: str, resource: str, *, query: dict[str, Any] | None = None, body: Any = None,
                _request_timeout: Any = None, stream: bool = False, text: bool = False) -> Any:
        """The answer's JSON (its text with `text`; the open urllib3 response with `stream`); ApiException for an
        answer outside 2xx, with the API server's Status as its body."""
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "*/*" if text or stream else "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = self.api.param_serialize(method=method, resource_path=resource, header_params=headers, body=body,
                                           query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
                                           auth_settings=["BearerToken"])
        response = self.api.call_api(*request, _request_timeout=_request_timeout)
        if 200 <= response.status <= 299 and stream:
            return response.response
        response.read()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.data.decode("utf-8", errors="replace") if text else json.loads(response.data)

    def get(self, plural: str, name: str, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        return self.request("GET", path(plural, namespace, name), **options)

    def list(self, plural: str, namespace: str, label_selector: str | None = None, **options: Any) -> dict[str, Any]:
        return self.request("GET", path(plural, namespace), query={"labelSelector": label_selector}, **options)

    def create(self, plural: str, namespace: str, body: dict[str, Any], **options: Any) -> dict[str, Any]:
        return self.request("POST", path(plural, namespace), body=body, **options)

    def delete(self, plural: str, name: str, namespace: str, propagation: str | None = None,
               **options: Any) -> dict[str, Any]:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation} if propagation else None
        return self.request("DELETE", path(plural, namespace, name), body=body, **options)

    def log(self, name: str, namespace: str, follow: bool = False, **options: Any) -> Any:
        """A pod's log: its text, or with `follow` the open response to stream (urllib3's `.stream(n)`)."""
        return self.request("GET", path("pods", namespace, name, "log"), query={"follow": "true" if follow else None},
                            stream=follow, text=not follow, **options)
