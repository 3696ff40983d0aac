"""TensorFlow's C++ start-up chatter, recognised exactly: mlsubmit_runtime.chatter is the one implementation.

mlsubmit drops these lines from the replica output it prefixes and from the emulator's job logs
(`mlsubmit.local.runner`), and hides them in its own process with `quiet_native_startup()`; the bundled trainer
uses the same recogniser through mlsubmit_runtime (a trainer may not import mlsubmit).
"""

from __future__ import annotations

from mlsubmit_runtime.chatter import drop_chatter, is_chatter, quiet_native_startup, without_chatter

__all__ = ["drop_chatter", "is_chatter", "quiet_native_startup", "without_chatter"]
