"""import attncheck and declare() need no numpy; the first function that does
raises an ImportError naming this interpreter and the fix (docs/python.md,
"Which Python"). numpy is made unimportable here, as in an interpreter without it."""
import sys

sys.modules["numpy"] = None  # import numpy now raises ImportError
import attncheck  # noqa: E402


@attncheck.declare(u=2**-24, exp_ulps=1)
def kernel(q, k, v, **_):
    return q


assert kernel.__attncheck__["u"] == 2**-24
try:
    attncheck.bf16_bits([1.0])
except ImportError as e:
    message = str(e)
    assert sys.executable in message, message
    assert "built for CPython" in message, message
    assert "numpy" in message, message
    print("ok:", message)
else:
    raise AssertionError("bf16_bits ran without numpy")
