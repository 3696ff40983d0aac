"""tools/refresh_prices.py reads the Cloud Billing Catalog API's SKUs into the price table's shape: two pages of a
services.skus.list response shaped like the API's (there is no network here, so the HTTP transport is
googleapiclient's HttpMockSequence; the client is built from the shipped cloudbilling v1 discovery document), n1
machines built from core and RAM SKUs, GPUs per unit, spot apart, commitments and unknown SKUs skipped."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("refresh_prices", ROOT / "tools" / "refresh_prices.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sku(description, usage, regions, nanos, units="0", unit="h", group="N1Standard", free_first=False):
    rates = [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": units, "nanos": nanos}}]
    if free_first:
        rates.insert(0, {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 0}})
        rates[1]["startUsageAmount"] = 100
    return {"name": f"services/x/skus/{abs(hash(description)) % 10**8}", "skuId": "AAAA-BBBB-CCCC",
            "description": description, "serviceRegions": regions, "serviceProviderName": "Google",
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute", "resourceGroup": group,
                         "usageType": usage},
            "pricingInfo": [{"effectiveTime": "2026-11-01T00:00:00Z", "summary": "",
                             "pricingExpression": {"usageUnit": unit, "displayQuantity": 1, "baseUnit": "s",
                                                   "baseUnitConversionFactor": 3600, "tieredRates": rates},
                             "currencyConversionRate": 1}]}


PAGE_1 = {"skus": [
    _sku("N1 Predefined Instance Core running in Americas", "OnDemand", ["us-central1", "us-east1"], 31611000),
    _sku("N1 Predefined Instance Ram running in Americas", "OnDemand", ["us-central1", "us-east1"], 4237000,
         unit="GiBy.h"),
    _sku("Spot Preemptible N1 Predefined Instance Core running in Americas", "Preemptible", ["us-central1"], 6655000),
    _sku("Commitment v1: Cpu in Americas for 1 Year", "Commit1Yr", ["us-central1"], 19915000),
], "nextPageToken": "page-2"}
PAGE_2 = {"skus": [
    _sku("Nvidia Tesla T4 GPU running in Americas", "OnDemand", ["us-central1"], 350000000, group="GPU"),
    _sku("Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", "Preemptible", ["us-central1"],
         175000000, group="GPU"),
    _sku("Nvidia Tesla A100 80GB GPU running in Americas", "OnDemand", ["us-central1"], 925000000, units="3",
         group="GPU", free_first=True),
    _sku("Network Internet Egress from Americas to Americas", "OnDemand", ["us-central1"], 120000000,
         unit="GiBy", group="PremiumInternetEgress"),
]}


def test_skus_become_prices_of_what_the_machine_table_knows(tmp_path):
    from googleapiclient.discovery import build
    from googleapiclient.http import HttpMockSequence

    tool = _tool()
    pages = [({"status": "200"}, json.dumps(page)) for page in (PAGE_1, PAGE_2, {"skus": []})]
    client = build("cloudbilling", "v1", static_discovery=True, developerKey="k", http=HttpMockSequence(pages))
    skus = list(tool.list_skus(client, tool.SERVICES["compute"]))
    assert len(skus) == 8  # both pages, through nextPageToken
    table, skipped = tool.parse(skus, "compute", ["us-central1", "us-east1"],
                                {"n1-standard-4": 4, "n1-highmem-2": 2, "n1-highcpu-16": 16})
    # n1-standard-4 = 4 vCPUs x $0.031611 + 15 GiB (4 x 3.75) x $0.004237 = 0.126444 + 0.063555 = 0.189999
    assert table[("compute", "machine", "n1-standard-4", "us-central1", False)] == pytest.approx(0.189999)
    assert table[("compute", "machine", "n1-standard-4", "us-east1", False)] == pytest.approx(0.189999)
    # n1-highmem-2 = 2 x 0.031611 + 13 GiB (2 x 6.5) x 0.004237 = 0.063222 + 0.055081 = 0.118303
    assert table[("compute", "machine", "n1-highmem-2", "us-central1", False)] == pytest.approx(0.118303)
    assert ("compute", "machine", "n1-standard-4", "us-central1", True) not in table  # spot core, but no spot RAM
    assert table[("compute", "accelerator", "NVIDIA_TESLA_T4", "us-central1", False)] == 0.35
    assert table[("compute", "accelerator", "NVIDIA_TESLA_T4", "us-central1", True)] == 0.175
    assert table[("compute", "accelerator", "NVIDIA_A100_80GB", "us-central1", False)] == 3.925  # not TESLA_A100
    assert ("compute", "accelerator", "NVIDIA_TESLA_A100", "us-central1", False) not in table
    assert skipped == [  # every SKU skipped, and why
        "Commitment v1: Cpu in Americas for 1 Year: usage type Commit1Yr (only on-demand and spot prices are kept)",
        "Network Internet Egress from Americas to Americas: not an n1 core, n1 RAM or GPU SKU (what mlsubmit prices)"]


def test_the_written_module_is_what_the_price_table_reads(tmp_path):
    tool = _tool()
    table = {("compute", "accelerator", "NVIDIA_TESLA_T4", "us-east1", False): 0.35}
    text = tool.module_text(table, "2026-11-25")
    namespace: dict = {}
    exec(compile(text, "prices_billing.py", "exec"), namespace)
    assert namespace["BILLING"] == table and namespace["FETCHED"] == "2026-11-25"


def test_two_skus_that_disagree_give_no_price():
    tool = _tool()
    skus = [_sku("Nvidia Tesla T4 GPU running in Americas", "OnDemand", ["us-central1"], 350000000, group="GPU"),
            _sku("Nvidia Tesla T4 GPU running in Iowa", "OnDemand", ["us-central1"], 360000000, group="GPU")]
    table, skipped = tool.parse(skus, "vertex", ["us-central1"], {})
    assert table == {}
    assert skipped == ["CONFLICT Nvidia Tesla T4 GPU running in Iowa: $0.36/h for NVIDIA_TESLA_T4 accelerator in "
                       "us-central1, but Nvidia Tesla T4 GPU running in Americas says $0.35/h; neither is kept"]


def test_a_region_given_as_a_string_is_that_region_and_every_skipped_sku_is_listed_with_why(tmp_path, capsys):
    tool = _tool()
    skus = [_sku("Nvidia Tesla T4 GPU running in Iowa", "OnDemand", "us-central1", 350000000, group="GPU"),
            _sku("Nvidia Tesla T4 GPU running in Sydney", "OnDemand", ["australia-southeast1"], 410000000, group="GPU"),
            _sku("Nvidia L4 GPU running in Iowa", "OnDemand", ["us-central1"], 560000000, group="GPU"),
            _sku("Nvidia L4 GPU running in Americas", "OnDemand", ["us-central1"], 600000000, group="GPU"),
            _sku("Commitment v1: Nvidia L4 GPU in Americas for 1 Year", "OnDemand", ["us-central1"], 1, group="GPU"),
            _sku("Nvidia Tesla T4 GPU per month", "OnDemand", ["us-central1"], 1, unit="mo", group="GPU")]
    table, _ = tool.parse(skus, "compute", ["us-central1"], {})
    assert table == {("compute", "accelerator", "NVIDIA_TESLA_T4", "us-central1", False): 0.35}  # not "u", "s", …
    pages = [({"status": "200"}, json.dumps({"skus": skus}))] * 2  # one page each: Vertex AI, Compute Engine
    code, err, _ = _run(tool, tmp_path, capsys, *pages, args=("--explain",))
    assert code == 0, err
    assert err.splitlines()[:6] == [
        "vertex: 1 prices, 4 SKUs skipped (0 malformed, 1 conflicting)",
        "  skipped: Nvidia Tesla T4 GPU running in Sydney: in no region mlsubmit prices (serviceRegions: "
        "australia-southeast1)",
        "  skipped: CONFLICT Nvidia L4 GPU running in Americas: $0.6/h for NVIDIA_L4 accelerator in us-central1, but "
        "Nvidia L4 GPU running in Iowa says $0.56/h; neither is kept",
        "  skipped: Commitment v1: Nvidia L4 GPU in Americas for 1 Year: a commitment SKU (commitments, reservations, "
        "DWS, TPUs and prediction are not priced)",
        "  skipped: Nvidia Tesla T4 GPU per month: no hourly USD price",
        "compute: 1 prices, 4 SKUs skipped (0 malformed, 1 conflicting)"]
    code, err, _ = _run(tool, tmp_path, capsys, *pages)  # without --explain: the conflict still, and how to see all
    assert err.splitlines()[:2] == [
        "vertex: 1 prices, 4 SKUs skipped (0 malformed, 1 conflicting); --explain lists every one and why",
        "  skipped: CONFLICT Nvidia L4 GPU running in Americas: $0.6/h for NVIDIA_L4 accelerator in us-central1, but "
        "Nvidia L4 GPU running in Iowa says $0.56/h; neither is kept"]


def _client(*answers):
    from googleapiclient.discovery import build
    from googleapiclient.http import HttpMockSequence

    return build("cloudbilling", "v1", static_discovery=True, developerKey="k", http=HttpMockSequence(list(answers)))


def _run(tool, tmp_path, capsys, *answers, args=()):
    out = tmp_path / "prices_billing.py"
    out.write_text("BILLING = {'kept': 1}\n")
    code = tool.main(["--output", str(out), *args], client=_client(*answers) if answers else None)
    return code, capsys.readouterr().err, out.read_text()


def test_a_refused_key_malformed_answers_and_a_folder_as_output_are_one_line_and_the_table_is_kept(
        tmp_path, capsys):
    tool = _tool()
    refused = ({"status": "400"}, json.dumps({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                         "message": "API key not valid. Please pass a valid API key."}}))
    code, err, kept = _run(tool, tmp_path, capsys, refused)
    assert code == 2 and kept == "BILLING = {'kept': 1}\n"
    assert err.splitlines() == ["error: the Cloud Billing API refused the request (400 INVALID_ARGUMENT: API key not "
                                "valid. Please pass a valid API key.); check --key (an API key with the Cloud Billing "
                                "API enabled) or the credentials' project"]
    not_a_list = ({"status": "200"}, json.dumps({"skus": "all of them"}))
    code, err, kept = _run(tool, tmp_path, capsys, not_a_list)
    assert code == 1 and kept == "BILLING = {'kept': 1}\n" and err.count("\n") == 1 and \
        err.startswith("error: the Cloud Billing API answered services/C7E2-9256-1C43/skus with something that is "
                       "not a SKU list"), err
    junk = [_sku("Nvidia Tesla T4 GPU running in Americas", "OnDemand", ["us-central1"], 350000000, group="GPU"),
            "a string", {"description": "Nvidia Tesla T4 GPU in Iowa", "category": {"usageType": "OnDemand"},
                         "pricingInfo": [{"pricingExpression": {"usageUnit": "h", "tieredRates": [{}]}}]}]
    pages = [({"status": "200"}, json.dumps({"skus": junk})), ({"status": "200"}, json.dumps({"skus": []}))]
    code, err, written = _run(tool, tmp_path, capsys, *pages)
    assert code == 0 and "NVIDIA_TESLA_T4" in written, err
    assert "vertex: 1 prices, 2 SKUs skipped (2 malformed, 0 conflicting)" in err
    assert "  skipped: MALFORMED 'a string' (TypeError: a str, not an object)" in err  # listed, never dropped silently
    assert "  skipped: MALFORMED Nvidia Tesla T4 GPU in Iowa (KeyError: 'unitPrice')" in err
    nothing = [({"status": "200"}, json.dumps({"skus": [junk[1]]})), ({"status": "200"}, json.dumps({"skus": []}))]
    code, err, kept = _run(tool, tmp_path, capsys, *nothing)
    assert code == 1 and kept == "BILLING = {'kept': 1}\n"  # an answer understood as nothing never empties the table
    assert err.splitlines()[-1].startswith("error: no price was understood in the API's answer; ")
    code = tool.main(["--output", str(tmp_path)], client=_client())
    assert code == 2 and capsys.readouterr().err.splitlines() == [
        f"error: invalid value for --output: received {str(tmp_path)!r}; expected a file in an existing folder; "
        "e.g. --output mlsubmit/jobspec/prices_billing.py"]


def test_without_credentials_the_tool_says_how_to_get_them(tmp_path, capsys, monkeypatch):
    tool = _tool()
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no application-default credentials there
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # and no metadata server to ask
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    code, err, kept = _run(tool, tmp_path, capsys)
    assert code == 2 and kept == "BILLING = {'kept': 1}\n"
    assert err.splitlines() == ["error: no credentials for the Cloud Billing API; run `gcloud auth "
                                "application-default login`, or pass --key API_KEY"]
