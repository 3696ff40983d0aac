"""The one-screen summary a run prints at its end."""

from __future__ import annotations


def render(result) -> str:
    m = result.metrics
    lines = [
        "─" * 64,
        f"mlsubmit trainer {'dry run ' if result.config.dry_run else ''}finished",
        f"  model        {m['model']} ({m['parameters']:,} parameters)",
        f"  devices      {m['replicas']} × {m['device_kind']}: {', '.join(m['devices'])}",
        f"  strategy     {m['strategy']} ({m['replicas']} replica{'s' if m['replicas'] != 1 else ''}, "
        f"global batch {m['global_batch']} = {m['per_replica_batch']} × {m['replicas']})",
        f"  backend      {m.get('backend', m['keras_backend'])} {m.get('backend_version', '')}: "
        f"{m.get('distribution', m['strategy'])}",
        f"  cluster      {', '.join(f'{k}×{v}' for k, v in m['cluster'].items())}",
        f"  epochs       {m['epochs_run']} (resumed from epoch {m['resumed_from_epoch']})"
        if m["resumed_from_epoch"] else f"  epochs       {m['epochs_run']}",
        f"  test         loss {m['test_loss']:.4f}, accuracy {m['test_accuracy']:.4f}",
    ]
    if m.get("validation_loss") is not None:
        lines.append(f"  validation   loss {m['validation_loss']:.4f}, accuracy {m['validation_accuracy']:.4f}")
    lines.append(f"  throughput   {m['samples_per_second']:,.0f} samples/s; wall {m['wall_seconds']:.1f} s "
                 f"(Keras {m['keras_version']} on {m['keras_backend']}"
                 + (f", TensorFlow {m['tensorflow_version']})" if m.get("tensorflow_version") else ")"))
    if result.reload_check is not None:
        checks = ", ".join(f"{k} max |Δ| {v:.1e}" for k, v in result.reload_check.items())
        lines.append(f"  reload check {checks}: identical predictions")
    for name, reason in sorted(m.get("formats_skipped", {}).items()):
        lines.append(f"  not saved    {name}: {reason}")
    files = len(result.manifest["files"]) if result.manifest else 0
    removed = "; a dry run's temporary job dir, removed at exit (give --job-dir to keep them)" \
        if getattr(result.config, "job_dir_is_temporary", False) else ""
    lines.append(f"  artifacts    {result.job_dir}/ ({files} files; MANIFEST.json written last{removed})")
    lines.append("─" * 64)
    return "\n".join(lines)
