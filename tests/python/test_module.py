"""The attncheck Python module as a pytest user meets it: `import attncheck`,
gate a kernel, call the oracle on numpy arrays (ctest python_module.pytest)."""
import os
import subprocess

import numpy as np
import pytest

import attncheck


def _registered_laws(*groups):
    """The names `attncheck laws` lists in these groups (TEST_ATTNCHECK: the binary, set by ctest)."""
    listed = subprocess.run([os.environ["TEST_ATTNCHECK"], "laws"], check=True, capture_output=True, text=True).stdout
    return [line for line in listed.splitlines() if line and not line[0].isspace() and line.split(".")[0] in groups]


def _attention(q, k, v, *, scale, causal, key_len, mask, dtype, ignore_causal=False):
    """Attention in float64 over the keys each row sees, rounded once to the storage type."""
    b, lq, hq, _ = q.shape
    lk, hkv = k.shape[1], k.shape[2]
    heads = [h // (hq // hkv) for h in range(hq)]
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("bihd,bjhd->bhij", q64, k64[:, :, heads]) * scale
    n = np.full(b, lk) if key_len is None else np.asarray(key_len)
    j = np.arange(lk)[None, None, None, :]
    i = np.arange(lq)[None, None, :, None]
    seen = j < n[:, None, None, None]
    if causal and not ignore_causal:
        seen = seen & (j <= n[:, None, None, None] - lq + i)
    if mask is not None:
        seen = seen & mask
    seen = np.broadcast_to(seen, s.shape)
    s = np.where(seen, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.where(seen, np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = p[..., None] * v64[:, :, heads].transpose(0, 2, 1, 3)[:, :, None]
    o = np.where(seen[..., None], terms, 0.0).sum(axis=3)
    l = p.sum(axis=-1)[..., None]
    o = np.where(l > 0, o / np.where(l > 0, l, 1.0), 0.0).transpose(0, 2, 1, 3)
    return o.astype({"f32": np.float32, "f16": np.float16}[dtype])


@attncheck.declare(u=2**-24, exp_ulps=1, dtypes=["f32", "f16"], features=["causal", "padding", "mask"])
def my_kernel(q, k, v, **kw):
    return _attention(q, k, v, **kw)


@attncheck.declare(u=2**-24, exp_ulps=1, features=["causal", "padding", "mask"])
def kernel_ignoring_causal(q, k, v, **kw):
    return _attention(q, k, v, **kw, ignore_causal=True)


def test_gate_passes_a_correct_kernel(tmp_path):
    table = attncheck.gate(my_kernel, cases=30, seed=7, out=tmp_path)
    assert {row["verdict"] for row in table} <= {"pass", "skipped"}
    assert any(row["law"] == "differential.output_within_bound_of_oracle" and row["judged"] > 0 for row in table)


def test_gate_raises_with_the_law_and_the_case_on_a_broken_kernel(tmp_path):
    with pytest.raises(attncheck.GateFailure) as failure:
        attncheck.gate(kernel_ignoring_causal, cases=30, seed=7, only=["causal", "differential"], out=tmp_path)
    report = str(failure.value)
    assert "FAIL causal.future_keys_never_change_past_outputs" in report
    assert "causal" in next(row["counterexample"] for row in failure.value.result["laws"] if row["verdict"] == "fail")
    assert "repro" in report and list(tmp_path.glob("*.json"))


def test_gate_reads_its_settings_through_the_run_codec(tmp_path):
    from attncheck import _core

    assert _core.run_defaults() == "cases=100 jobs=2 law_timeout=120"
    # --run text; the keyword beside it wins; the header prints the run string.
    with pytest.raises(attncheck.GateFailure) as failure:
        attncheck.gate(kernel_ignoring_causal, config="cases=5 seed=3 only=causal", seed=7, out=tmp_path)
    assert "  run: seed=7 cases=5 only=causal law_timeout=120\n" in str(failure.value)
    with pytest.raises(ValueError, match=r"gate: cases=0: cases is an integer in \[1, 10000000\]"):
        attncheck.gate(my_kernel, cases=0, out=tmp_path)


def test_oracle_on_numpy_arrays_bounds_a_float64_computation():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 5, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, 7, 2, 8)).astype(np.float32)
    v = rng.standard_normal((2, 7, 2, 3)).astype(np.float32)
    key_len = np.array([7, 4])
    o, lse, bound, lse_bound = attncheck.oracle(q, k, v, causal=True, key_len=key_len)
    assert o.shape == (2, 5, 4, 3) and lse.shape == (2, 4, 5) and bound.shape == o.shape
    assert np.all(np.isfinite(bound)) and np.all(bound >= 0)
    ours = _attention(q, k, v, scale=float(np.float32(1 / np.sqrt(8))), causal=True, key_len=key_len, mask=None, dtype="f32")
    assert np.all(np.abs(ours.astype(np.float64) - o) <= bound)
    # Batch 1 has 4 valid keys and 5 queries: its first query sees nothing.
    assert np.all(o[1, 0] == 0) and np.all(lse[1, :, 0] == -np.inf)


def test_oracle_refuses_bad_input_naming_the_field():
    q = np.zeros((1, 1, 3, 2), np.float32)
    kv = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="hq|hkv"):
        attncheck.oracle(q, kv, kv)
    with pytest.raises(ValueError, match="float64"):
        attncheck.oracle(q.astype(np.float64), kv, kv)


def test_case_parses_prints_and_materializes_what_the_oracle_sees():
    line = "ATTN(b=2,hq=4,hkv=2,lq=3,lk=5,d=4,dv=2,causal,kpad=[5,2],f16,seed=11)"
    case = attncheck.Case(line)
    assert str(case) == line and attncheck.Case.parse(str(case)) == case
    assert (case.b, case.hq, case.hkv, case.lq, case.lk, case.dtype, case.causal) == (2, 4, 2, 3, 5, "f16", True)
    m = case.materialize()
    assert m["q"].dtype == np.float16 and m["q"].shape == (2, 3, 4, 4) and list(m["key_len"]) == [5, 2]
    from_line = attncheck.oracle(line)
    from_arrays = attncheck.oracle(m["q"], m["k"], m["v"], scale=m["scale"], causal=m["causal"], key_len=m["key_len"])
    np.testing.assert_array_equal(from_line.o, from_arrays.o)
    np.testing.assert_array_equal(attncheck.oracle(case).lse, from_line.lse)
    # The materialized case drives a kernel directly.
    assert my_kernel(**m).shape == (2, 3, 4, 2)


def test_gate_hands_variants_to_a_callable_that_declares_them(tmp_path):
    from attncheck.subjects import numpy_variants

    table = attncheck.gate(numpy_variants.attend_window, cases=20, seed=7, only=["differential"], out=tmp_path / "pass")
    assert [row["verdict"] for row in table] == ["pass"]

    # Declared and taken, then not applied: the law that draws the variant fails.
    @attncheck.declare(u=2**-53, exp_ulps=1, features=["causal", "window"])
    def window_ignored(q, k, v, *, window=None, **kw):
        return numpy_variants.attention(q, k, v, **kw)[0]

    with pytest.raises(attncheck.GateFailure) as failure:
        attncheck.gate(window_ignored, cases=20, seed=7, only=["differential"], out=tmp_path / "fail")
    assert "window=[" in next(row["counterexample"] for row in failure.value.result["laws"] if row["verdict"] == "fail")


def test_gate_hands_fp8_inputs_and_descales_to_a_callable_that_declares_them(tmp_path):
    import subjects

    table = attncheck.gate(subjects.fp8_reference, cases=60, seed=7, only=["differential", "descale"], out=tmp_path / "pass")
    assert [row["verdict"] for row in table] == ["pass"] * 4
    # Declared and taken, then K's descale dropped: the differential law fails on an fp8 case.
    with pytest.raises(attncheck.GateFailure) as failure:
        attncheck.gate(subjects.fp8_k_descale_dropped, cases=60, seed=7, only=["differential"], out=tmp_path / "fail")
    assert "kdescale=" in next(row["counterexample"] for row in failure.value.result["laws"] if row["verdict"] == "fail")
    # The two come together: fp8 among the dtypes without the feature is refused at the declaration.
    @attncheck.declare(u=2**-53, exp_ulps=1, dtypes=["f32", "e4m3"])
    def fp8_undeclared(q, k, v, **kw):
        return subjects.fp8_reference(q, k, v, **kw)

    with pytest.raises(ValueError, match="fp8"):
        attncheck.gate(fp8_undeclared, cases=1, out=tmp_path / "undeclared")
    # A case's keywords, as the callable receives them: fp8 tensors as uint8 bits, their types and descales.
    m = attncheck.Case("ATTN(b=2,hq=2,hkv=1,lq=2,lk=3,d=4,dv=4,ktype=e4m3,vtype=e5m2,kdescale=head,vdescale=tensor,f32,"
                       "seed=3)").materialize()
    assert m["k"].dtype == np.uint8 and m["v"].dtype == np.uint8 and m["q"].dtype == np.float32
    assert m["dtypes"] == {"q": "f32", "k": "e4m3", "v": "e5m2", "o": "f32"}
    assert m["k_descale"].shape == (2, 1) and m["v_descale"].shape == (1,) and "q_descale" not in m
    o, lse = subjects.fp8_reference(**m)
    assert o.shape == (2, 2, 2, 4) and np.isfinite(o).all()


def test_materialize_gives_a_variant_case_as_the_keywords_a_subject_receives():
    line = "ATTN(b=2,hq=2,hkv=1,lq=3,lk=5,d=2,dv=2,causal,window=[1,0],chunk=4,softcap=5,sinks=normal,alibi=standard,bias=1x2x1x5,f32,seed=3)"
    m = attncheck.Case(line).materialize()
    assert m["window"] == (1, 0) and m["chunk"] == 4 and m["softcap"] == 5.0
    assert m["sinks"].dtype == np.float32 and m["sinks"].shape == (2,) and m["alibi_slopes"].shape == (2,)
    assert m["bias"].shape == (2, 2, 3, 5) and m["bias"].strides[0] == 0
    from attncheck.subjects import numpy_variants

    o, lse = numpy_variants.attend(**m)
    ref = attncheck.oracle(line, u=2**-53, exp_ulps=1, tanh_ulps=2)
    assert np.all(np.abs(o.astype(np.float64) - ref.o) <= ref.bound)
    # The oracle on arrays takes the same keywords and computes the same.
    from_arrays = attncheck.oracle(**{key: m[key] for key in m if key != "dtype"}, u=2**-53, exp_ulps=1, tanh_ulps=2)
    np.testing.assert_array_equal(from_arrays.o, ref.o)
    np.testing.assert_array_equal(from_arrays.lse, ref.lse)
    np.testing.assert_array_equal(from_arrays.bound, ref.bound)
    with pytest.raises(ValueError, match="sinks"):
        attncheck.oracle(m["q"], m["k"], m["v"], sinks=np.zeros(3, np.float32))
    # A case without variants has none of the keywords: today's signature.
    assert "window" not in attncheck.Case("ATTN(b=1,hq=1,hkv=1,lq=1,lk=1,d=1,dv=1,f32)").materialize()


def _check_variant_keywords(q, k, kw, torch_mode):
    """The conventions of docs/python.md, "Variants": raises (failing the gate) on any other."""
    b, lq, hq, _ = q.shape
    array_type = __import__("torch").Tensor if torch_mode else np.ndarray
    if "window" in kw:
        left, right = kw["window"]
        assert type(left) is int and type(right) is int and left >= -1 and right >= -1 and max(left, right) >= 0
    if "chunk" in kw:
        assert type(kw["chunk"]) is int and kw["chunk"] >= 1
    if "softcap" in kw:
        assert type(kw["softcap"]) is float and kw["softcap"] > 0 and float(np.float32(kw["softcap"])) == kw["softcap"]
    for name in ("sinks", "alibi_slopes"):
        if name in kw:
            assert isinstance(kw[name], array_type) and tuple(kw[name].shape) == (hq,)
            assert str(kw[name].dtype) in ("float32", "torch.float32")
    if "bias" in kw:
        bias = kw["bias"]
        assert isinstance(bias, array_type) and tuple(bias.shape) == (b, hq, lq, k.shape[1])
        assert str(bias.dtype) in ("float32", "float16", "uint16", "torch.float32", "torch.float16", "torch.bfloat16")
    assert set(kw) <= {"scale", "causal", "key_len", "mask", "dtype", "window", "chunk", "softcap", "sinks", "alibi_slopes",
                       "bias"}


_ALL_VARIANTS = ["causal", "padding", "mask", "window", "chunk", "softcap", "sinks", "alibi", "bias"]


@attncheck.declare(u=2**-53, exp_ulps=1, tanh_ulps=2, dtypes=["f32", "bf16"], features=_ALL_VARIANTS)
def keyword_checker(q, k, v, **kw):
    _check_variant_keywords(q, k, kw, torch_mode=False)
    from attncheck.subjects import numpy_variants

    return numpy_variants.attention(q, k, v, **kw)[0]


@attncheck.declare(u=2**-53, exp_ulps=1, tanh_ulps=2, dtypes=["f32", "f16"], features=_ALL_VARIANTS, tensors="torch")
def torch_keyword_checker(q, k, v, **kw):
    _check_variant_keywords(q, k, kw, torch_mode=True)
    from attncheck.subjects import numpy_variants

    # A bf16 bias arrives as torch.bfloat16, which has no numpy form: widen it (exactly) to float32.
    as_numpy = {key: (val.float().numpy() if key == "bias" else val.numpy() if hasattr(val, "numpy") else val)
                for key, val in kw.items()}
    return numpy_variants.attention(q.numpy(), k.numpy(), v.numpy(), **as_numpy)[0]


@pytest.mark.parametrize("kernel", [keyword_checker, torch_keyword_checker], ids=["numpy", "torch"])
def test_variant_keywords_follow_the_documented_conventions(kernel, tmp_path):
    if kernel is torch_keyword_checker:
        pytest.importorskip("torch")
    table = attncheck.gate(kernel, cases=30, seed=5, only=["differential"], out=tmp_path)
    assert [row["verdict"] for row in table] == ["pass"]


def test_gate_takes_the_paged_and_ragged_forms_and_a_backward_from_python(tmp_path):
    # docs/python.md, "Paged K/V and ragged batches" and "Backward": the same
    # declarations work through attncheck.gate; a paged kernel that drops a
    # partial last page fails paged.equals_dense.
    from attncheck.subjects import numpy_backward, numpy_paged

    forms = ["paged", "page_table", "ragged"]
    table = attncheck.gate(numpy_paged.attend, cases=200, seed=7, only=forms, out=tmp_path / "paged")
    assert {row["law"]: row["verdict"] for row in table} == {law: "pass" for law in _registered_laws(*forms)}
    with pytest.raises(attncheck.GateFailure) as failure:
        attncheck.gate(numpy_paged.attend_drops_partial_page, cases=50, seed=7, only=forms, out=tmp_path / "broken")
    assert "FAIL paged.equals_dense" in str(failure.value)
    # 100 cases: the translated-keys law samples a tenth of them and judges
    # about three in four (keys with no exact shift are left unjudged); at 30
    # cases it ran 3 and judged 1, under its 0.6 floor.
    table = attncheck.gate(numpy_backward.attend, cases=100, seed=7, only=["backward"], out=tmp_path / "backward")
    # A Python backward takes no variants yet (no FEATURE3_BACKWARD_VARIANTS): that law skips, saying so.
    verdicts = {row["law"]: row["verdict"] for row in table}
    assert verdicts.pop("backward.variant_gradients_within_bound_of_oracle") == "skipped"
    assert set(verdicts.values()) == {"pass"} and len(verdicts) == len(_registered_laws("backward")) - 1
