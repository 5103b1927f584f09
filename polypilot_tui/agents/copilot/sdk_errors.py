"""What a call into the Copilot SDK raises when the CLI or its answer fails (read in the SDK
1.0.27 this package is pinned to).

- ``JsonRpcError``: the CLI answered with an error (not signed in, an unknown model, a
  session it does not know);
- ``ProcessExitedError``, ``EOFError``, ``OSError`` (a broken pipe): the CLI is gone;
- ``RuntimeError``: the client is not started, or stopped meanwhile;
- ``TimeoutError``: our ``asyncio.wait_for`` around every call;
- :data:`SHAPE_ERRORS`: an answer the SDK's generated classes cannot read (their checks
  are ``assert isinstance``).

Anything else out of the SDK is a bug (ours or its) and is left to the caller's boundary,
which logs it in full.
"""

from __future__ import annotations

SHAPE_ERRORS: tuple[type[Exception], ...] = (AssertionError, AttributeError, KeyError, TypeError, ValueError)
"""What the SDK's generated ``from_dict``/``to_dict`` raise on a shape they do not expect."""


def sdk_failures() -> tuple[type[Exception], ...]:
    """The exceptions above (a function: the SDK is imported only when a Copilot session starts)."""
    from copilot._jsonrpc import JsonRpcError, ProcessExitedError

    return (JsonRpcError, ProcessExitedError, EOFError, OSError, RuntimeError, TimeoutError, *SHAPE_ERRORS)
