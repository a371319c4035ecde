"""A kopf (https://github.com/nolar/kopf) admission server for tests/integration/differential.rs.

Run as `kopf run --standalone --all-namespaces admission.py` with KOPF_ADDR, KOPF_PORT,
KOPF_CERT and KOPF_KEY in the environment (and KUBECONFIG: kopf reads the API server's resources
at start). It creates no webhook configuration (`settings.admission.managed` stays unset): the
suite registers it, directly or behind the gateway. Handlers are served at `/<id>`.
"""

import os

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.admission.server = kopf.WebhookServer(
        addr=os.environ["KOPF_ADDR"],
        port=int(os.environ["KOPF_PORT"]),
        certfile=os.environ["KOPF_CERT"],
        pkeyfile=os.environ["KOPF_KEY"],
    )
    settings.peering.standalone = True


@kopf.on.mutate("configmaps", id="kopf-label", operation="CREATE")
def label(body, patch, **_):
    """Adds `kopf=seen` and, when `data.kopf-copy` is set, copies it into a label."""
    patch.metadata.labels["kopf"] = "seen"
    copy = (body.get("data") or {}).get("kopf-copy")
    if copy:
        patch.metadata.labels["kopf-copy"] = copy


@kopf.on.validate("configmaps", id="kopf-deny")
def deny(body, **_):
    """Refuses a configmap whose data has `kopf-deny`."""
    if "kopf-deny" in (body.get("data") or {}):
        raise kopf.AdmissionError("kopf refuses data kopf-deny", code=403)
