"""The layer mode (attncheck.layer, docs/tutorials.md "The layer mode"): the
corrected tutorial modules pass, each defect that lives outside the attention
kernel is caught by its own law, shapes outside a module's interface are
skipped with the reason, and the bound is not vacuous."""
import pytest

torch = pytest.importorskip("torch")

from attncheck import layer  # noqa: E402
from attncheck.tutorials import cross_attention, gqa_float_heads, mqa, seed004_mha, self_attention  # noqa: E402


def verdicts(subject, cases=30, seed=1):
    return {r["name"]: r for r in layer.check(subject, cases, seed)}


@pytest.mark.parametrize("module", [seed004_mha, cross_attention, mqa, gqa_float_heads, self_attention])
def test_corrected_modules_pass(module):
    rows = verdicts(module.layer_corrected)
    assert all(r["verdict"] in ("pass", "skipped") for r in rows.values()), rows
    assert rows["layer.output_within_bound_of_oracle"]["judged"] > 0


@pytest.mark.parametrize("module, variant, law", [
    (seed004_mha, "layer_only_kv_from_query", "layer.output_within_bound_of_oracle"),
    (seed004_mha, "layer_only_batch_from_query", "layer.broadcast_context_matches_each_batch"),
    (seed004_mha, "layer_additive_caller", "layer.masked_keys_ignored"),
    (seed004_mha, "layer_only_fill_1e9", "layer.rows_with_no_key_give_the_bias"),
    (cross_attention, "layer_only_fc_q_width", "layer.output_within_bound_of_oracle"),
    (mqa, "layer_only_fc_q_width", "layer.output_within_bound_of_oracle"),
    (gqa_float_heads, "layer_only_dropout_train", "layer.deterministic_as_built"),
])
def test_each_layer_defect_is_caught_by_its_law(module, variant, law):
    row = verdicts(getattr(module, variant))[law]
    assert row["verdict"] == "fail", row
    assert row["counterexample"].startswith("LAYER(")


def test_the_additive_caller_passes_where_nothing_is_masked():
    # the inverted convention shows only where there is a mask
    assert verdicts(seed004_mha.layer_additive_caller)["layer.output_within_bound_of_oracle"]["verdict"] == "pass"


def test_interface_limits_are_skipped_with_their_reason():
    rows = verdicts(self_attention.layer_corrected)
    outside = rows["layer.output_within_bound_of_oracle"]["outside"]
    assert "one head (002:27-37)" in outside, outside
    assert rows["layer.broadcast_context_matches_each_batch"]["verdict"] == "skipped"


def test_the_bound_is_not_vacuous():
    """An output off by one part in 10^4 fails: the bound is far below that."""
    base = seed004_mha.layer_corrected
    nudged = layer.Layer(base.build, lambda m, xs, vis: base.call(m, xs, vis) * (1 + 1e-4), base.weights,
                         base.inputs, base.interface, base.mask)
    assert verdicts(nudged)["layer.output_within_bound_of_oracle"]["verdict"] == "fail"
