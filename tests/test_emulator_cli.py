"""`mlsubmit emulator` as a user starts it: what it prints, the Cloud Storage emulator it starts itself, a clean
stop on Ctrl-C, and one-line errors (exit 2) for bad flags."""

from __future__ import annotations

import json
import re
import signal
import socket
import sys
import urllib.request

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from support.training_emulator import start_emulator_command


def _listening(url: str) -> bool:
    host, port = url.rsplit("//", 1)[1].split(":")
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, int(port))) == 0


def test_it_starts_its_own_gcs_emulator_prints_the_variables_and_stops_on_ctrl_c(tmp_path):
    process, text = start_emulator_command(  # Ctrl-C works in a background job
        [sys.executable, "-m", "mlsubmit", "emulator", "--port", "0", "--quiet", "--data-dir", str(tmp_path / "data"),
         "--bucket", "gs://demo-bucket", "--bucket", "demo-bucket"], tmp_path, timeout=30)
    try:
        endpoint = re.search(r"export MLSUBMIT_API_ENDPOINT=(http://127\.0\.0\.1:\d+)", text).group(1)
        gcs = re.search(r"export STORAGE_EMULATOR_HOST=(http://127\.0\.0\.1:\d+)", text).group(1)
        assert f"export CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM={endpoint}/" in text
        assert "fake-gcs-server started by mlsubmit" in text and "kept in" in text
        assert _listening(endpoint) and _listening(gcs)
        assert "bucket(s) gs://demo-bucket\n" in text  # created once, ready for --staging-bucket gs://demo-bucket
        with urllib.request.urlopen(f"{gcs}/storage/v1/b/demo-bucket", timeout=5) as answer:
            assert json.load(answer)["name"] == "demo-bucket"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert not _listening(endpoint) and not _listening(gcs)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("args, says", [
    (["--port", "70000"], "--port"),
    (["--gcs-port", "4443", "--gcs-endpoint", "http://127.0.0.1:4443"], "both --gcs-port and --gcs-endpoint"),
    (["--gcs-endpoint", "ftp://x"], "--gcs-endpoint"),
    (["--gcs-endpoint", "http://127.0.0.1:1"], "nothing answers at http://127.0.0.1:1"),
    (["--max-running", "0"], "--max-running"),
    (["--bucket", "Bad_Bucket!"], "invalid value for --bucket: received 'Bad_Bucket!'; expected a bucket name"),
])
def test_bad_flags_are_one_line_and_exit_2(args, says):
    result = CliRunner().invoke(app, ["emulator", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def test_a_data_dir_that_is_a_file_or_a_busy_port_is_exit_2(tmp_path, gcs_emulator):
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(app, ["emulator", "--gcs-endpoint", gcs_emulator.endpoint,
                                      "--data-dir", str(tmp_path / "file")])
    assert result.exit_code == 2 and "--data-dir" in result.output
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["emulator", "--gcs-endpoint", gcs_emulator.endpoint, "--port", str(port)])
    assert result.exit_code == 2 and f"invalid value for --port: received {port}" in result.output
