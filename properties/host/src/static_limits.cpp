// A version 4 instance's static limits (docs/abi.md "Static limits"): checked
// at load, field by field; the generators fit their draws into them, and the
// call adapters decline a case outside them on the subject's behalf.
#include "attncheck/static_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "attncheck/dtype.hpp"

namespace attncheck {

namespace {

std::string dims_text(const std::vector<std::int64_t>& v) {
  std::string t;
  for (std::int64_t d : v) t += (t.empty() ? "" : ", ") + std::to_string(d);
  return "{" + t + "}";
}

// The sign bit of a scale: nullopt is the default 1/sqrt(D), positive.
std::uint32_t sign_of(const std::optional<float>& s) {
  if (!s || *s > 0) return ATTNCHECK_SCALE_SIGN_POSITIVE;
  return *s == 0 ? ATTNCHECK_SCALE_SIGN_ZERO : ATTNCHECK_SCALE_SIGN_NEGATIVE;
}

// A max_bias in the shortest form that reads back (8, 4.5, 0.25).
std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}

// A storage type's bit, as dtypes and bias_dtypes hold it (dtype's order is the ABI's).
std::uint32_t type_bit(dtype t) { return 1u << static_cast<unsigned>(t); }

const char* sign_name(std::uint32_t bit) {
  return bit == ATTNCHECK_SCALE_SIGN_POSITIVE ? "positive" : bit == ATTNCHECK_SCALE_SIGN_ZERO ? "zero" : "negative";
}

}  // namespace

bool static_limits::none() const {
  return max_head_dim == 0 && head_dim_multiple <= 1 && head_dims.empty() && !dv_equals_d && !causal_lq_at_most_lk &&
         min_lk <= 1 && max_group == 0 && scale_signs == 0 && bias_dtypes == 0 && alibi_max_bias == 0 && alibi_max_distance == 0;
}

bool static_limits::takes_head_dim(std::int64_t d) const {
  return (max_head_dim == 0 || d <= max_head_dim) && (head_dim_multiple <= 1 || d % head_dim_multiple == 0) &&
         (head_dims.empty() || std::find(head_dims.begin(), head_dims.end(), d) != head_dims.end());
}

bool is_limit_decline(std::string_view key) { return key.substr(0, limit_key_prefix.size()) == limit_key_prefix; }

std::string static_limits::outside(const attn_case& c) const {
  // The declines key is the prefix and the field; the rest says by how much.
  const auto limit = [](const char* field, const std::string& what) {
    return std::string(limit_key_prefix) + field + ": " + what;
  };
  const auto str = [](std::int64_t x) { return std::to_string(x); };
  for (const auto& [name, d] : {std::pair{"D", c.d}, std::pair{"Dv", c.dv}}) {
    const std::string is = std::string(name) + " = " + str(d);
    if (max_head_dim > 0 && d > max_head_dim) return limit("max_head_dim", is + " > " + str(max_head_dim));
    if (head_dim_multiple > 1 && d % head_dim_multiple != 0)
      return limit("head_dim_multiple", is + " is no multiple of " + str(head_dim_multiple));
    if (!takes_head_dim(d)) return limit("head_dims", is + " is not in " + dims_text(head_dims));
  }
  if (dv_equals_d && c.dv != c.d) return limit("dv_equals_d", "Dv = " + str(c.dv) + ", D = " + str(c.d));
  if (causal_lq_at_most_lk && c.causal && c.lq > c.lk)
    return limit("causal_lq_at_most_lk", "causal with Lq = " + str(c.lq) + " > Lk = " + str(c.lk));
  if (c.lk < min_lk) return limit("min_lk", "Lk = " + str(c.lk) + " < " + str(min_lk));
  if (max_group > 0 && c.group() > max_group) return limit("max_group", "Hq / Hkv = " + str(c.group()) + " > " + str(max_group));
  if (scale_signs != 0 && !(scale_signs & sign_of(c.scale)))
    return limit("scale_signs", std::string("a ") + sign_name(sign_of(c.scale)) + " scale");
  if (bias_dtypes != 0 && c.variants.has_bias() && !(bias_dtypes & type_bit(c.variants.bias_type)))
    return limit("bias_dtypes", "a bias in " + std::string(name(c.variants.bias_type)));
  if (alibi_max_distance > 0 && c.variants.has_alibi() && std::max(c.lk, c.lq) - 1 > alibi_max_distance)
    return limit("alibi_max_distance",
                 "ALiBi with |j - p| up to " + str(std::max(c.lk, c.lq) - 1) + " > " + str(alibi_max_distance));
  if (!takes_alibi(c.variants))
    return limit("alibi_slopes",
                 std::string(name(c.variants.alibi)) + " slopes" +
                     (c.variants.alibi == alibi_kind::standard ? " of max_bias " + num(c.variants.alibi_max_bias) : "") +
                     ", not max_bias " + num(alibi_max_bias) + "'s");
  return {};
}

void static_limits::fit_shape(attn_case& c, bool alibi) const {
  const auto fit = [this](std::int64_t d) {
    if (takes_head_dim(d)) return d;
    if (!head_dims.empty()) {
      // The smallest listed size at or above d, else the largest.
      std::int64_t best = 0;
      for (std::int64_t h : head_dims)
        if (h >= d && (best == 0 || h < best)) best = h;
      return best ? best : *std::max_element(head_dims.begin(), head_dims.end());
    }
    if (head_dim_multiple > 1) d = (d + head_dim_multiple - 1) / head_dim_multiple * head_dim_multiple;
    if (max_head_dim > 0 && d > max_head_dim)
      d = head_dim_multiple > 1 ? max_head_dim / head_dim_multiple * head_dim_multiple : max_head_dim;
    return d;
  };
  c.d = fit(c.d);
  c.dv = dv_equals_d ? c.d : fit(c.dv);
  c.lk = std::max(c.lk, min_lk);
  if (alibi && alibi_max_distance > 0) {
    c.lk = std::min(c.lk, alibi_max_distance + 1);
    c.lq = std::min(c.lq, alibi_max_distance + 1);
  }
  if (max_group > 0 && c.group() > max_group) c.hq = c.hkv * max_group;
}

void static_limits::fit_causal(attn_case& c) const {
  if (causal_lq_at_most_lk && c.causal) c.lq = std::min(c.lq, c.lk);
}

void static_limits::fit_scale(attn_case& c) const {
  if (scale_signs == 0 || (scale_signs & sign_of(c.scale))) return;
  // The magnitude kept; a zero scale takes the default's, 1/sqrt(D).
  attn_case by_default;
  by_default.d = c.d;
  const float magnitude = c.scale && *c.scale != 0 ? std::fabs(*c.scale) : by_default.effective_scale();
  if (scale_signs & ATTNCHECK_SCALE_SIGN_POSITIVE)
    c.scale = c.scale && *c.scale != 0 ? std::optional<float>(magnitude) : std::nullopt;
  else if (scale_signs & ATTNCHECK_SCALE_SIGN_NEGATIVE)
    c.scale = -magnitude;
  else
    c.scale = 0.0f;
}

dtype static_limits::bias_type_taken(dtype want) const {
  for (int k = 0; k < 3 && bias_dtypes != 0 && !(bias_dtypes & type_bit(want)); ++k)
    want = static_cast<dtype>((static_cast<int>(want) + 1) % 3);
  return want;
}

void static_limits::fit_variants(attn_case& c) const {
  if (c.variants.has_bias()) c.variants.bias_type = bias_type_taken(c.variants.bias_type);
  if (!takes_alibi(c.variants)) {
    c.variants.alibi = alibi_kind::standard;
    c.variants.alibi_max_bias = static_cast<float>(alibi_max_bias);
  }
}

std::string static_limits::text() const {
  std::string t;
  const auto add = [&t](const std::string& s) { t += (t.empty() ? "" : ", ") + s; };
  if (max_head_dim > 0) add("D, Dv <= " + std::to_string(max_head_dim));
  if (head_dim_multiple > 1) add("D, Dv multiples of " + std::to_string(head_dim_multiple));
  if (!head_dims.empty()) add("D, Dv in " + dims_text(head_dims));
  if (dv_equals_d) add("Dv = D");
  if (causal_lq_at_most_lk) add("causal Lq <= Lk");
  if (min_lk > 1) add("Lk >= " + std::to_string(min_lk));
  if (max_group == 1) add("no GQA");
  if (max_group > 1) add("Hq / Hkv <= " + std::to_string(max_group));
  if (scale_signs != 0) {
    std::string signs;
    for (std::uint32_t bit : {ATTNCHECK_SCALE_SIGN_POSITIVE, ATTNCHECK_SCALE_SIGN_ZERO, ATTNCHECK_SCALE_SIGN_NEGATIVE})
      if (scale_signs & bit) signs += (signs.empty() ? "" : " or ") + std::string(sign_name(bit));
    add("scale " + signs);
  }
  if (bias_dtypes != 0) {
    std::string types;
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16})
      if (bias_dtypes & type_bit(t)) types += (types.empty() ? "" : " or ") + std::string(name(t));
    add("bias " + types);
  }
  if (alibi_max_bias != 0) add("ALiBi slopes from max_bias " + num(alibi_max_bias));
  if (alibi_max_distance > 0) add("ALiBi |j - p| <= " + std::to_string(alibi_max_distance));
  return t;
}

static_limits read_limits(const attncheck_limits* l, const std::string& spec) {
  static_limits out;
  if (!l) return out;
  const auto refuse = [&](const char* field, const std::string& why) {
    throw input_error(std::string("subject.limits.") + field, spec + ": " + why);
  };
  if (l->struct_size < sizeof(attncheck_limits))
    refuse("struct_size", "the limits' struct_size " + std::to_string(l->struct_size) + " is under its first version's size " +
                              std::to_string(sizeof(attncheck_limits)));
  const std::string dim_range = " must lie in [0, " + std::to_string(ATTNCHECK_MAX_LIMIT_HEAD_DIM) + "]";
  if (l->max_head_dim < 0 || l->max_head_dim > ATTNCHECK_MAX_LIMIT_HEAD_DIM)
    refuse("max_head_dim", "max_head_dim = " + std::to_string(l->max_head_dim) + dim_range);
  if (l->head_dim_multiple < 0 || l->head_dim_multiple > ATTNCHECK_MAX_LIMIT_HEAD_DIM)
    refuse("head_dim_multiple", "head_dim_multiple = " + std::to_string(l->head_dim_multiple) + dim_range);
  out.max_head_dim = l->max_head_dim;
  out.head_dim_multiple = l->head_dim_multiple;
  if (out.head_dim_multiple > 1 && out.max_head_dim > 0 && out.head_dim_multiple > out.max_head_dim)
    refuse("head_dim_multiple", "head_dim_multiple = " + std::to_string(out.head_dim_multiple) + " is above max_head_dim = " +
                                    std::to_string(out.max_head_dim) + ": no head size would be taken");
  bool ended = false;
  for (int i = 0; i < ATTNCHECK_SIZE_HINT_SLOTS; ++i) {
    const std::int64_t d = l->head_dims[i];
    const std::string field = "head_dims[" + std::to_string(i) + "] = " + std::to_string(d);
    if (d == 0) {
      ended = true;
      continue;
    }
    if (ended) refuse("head_dims", field + " follows a 0, which ends the list");
    if (d < 0 || d > ATTNCHECK_MAX_LIMIT_HEAD_DIM) refuse("head_dims", field + dim_range);
    if ((out.max_head_dim > 0 && d > out.max_head_dim) || (out.head_dim_multiple > 1 && d % out.head_dim_multiple != 0))
      refuse("head_dims", field + " breaks max_head_dim or head_dim_multiple: the limits contradict each other");
    out.head_dims.push_back(d);
  }
  const auto flag = [&](const char* field, std::int32_t x) {
    if (x != 0 && x != 1) refuse(field, std::string(field) + " = " + std::to_string(x) + " must be 0 or 1");
    return x == 1;
  };
  out.dv_equals_d = flag("dv_equals_d", l->dv_equals_d);
  out.causal_lq_at_most_lk = flag("causal_lq_at_most_lk", l->causal_lq_at_most_lk);
  if (l->min_lk < 0 || l->min_lk > ATTNCHECK_MAX_LIMIT_MIN_LK)
    refuse("min_lk",
           "min_lk = " + std::to_string(l->min_lk) + " must lie in [0, " + std::to_string(ATTNCHECK_MAX_LIMIT_MIN_LK) + "]");
  out.min_lk = l->min_lk;
  if (l->max_group < 0) refuse("max_group", "max_group = " + std::to_string(l->max_group) + " must be 0 (any) or positive");
  out.max_group = l->max_group;
  constexpr std::uint32_t signs = ATTNCHECK_SCALE_SIGN_POSITIVE | ATTNCHECK_SCALE_SIGN_ZERO | ATTNCHECK_SCALE_SIGN_NEGATIVE;
  if (l->scale_signs & ~signs)
    refuse("scale_signs",
           "scale_signs = " + std::to_string(l->scale_signs) + " has bits outside ATTNCHECK_SCALE_SIGN_* (0x1, 0x2, 0x4)");
  out.scale_signs = l->scale_signs;
  constexpr std::uint32_t types = (1u << ATTNCHECK_F32) | (1u << ATTNCHECK_F16) | (1u << ATTNCHECK_BF16);
  if (l->bias_dtypes & ~types)
    refuse("bias_dtypes",
           "bias_dtypes = " + std::to_string(l->bias_dtypes) + " has bits outside f32, f16 and bf16's (0x1, 0x2, 0x4)");
  out.bias_dtypes = l->bias_dtypes;
  // Designed, not judged yet: refused rather than loaded and left unjudged.
  constexpr const char* later = " is not judged by this attncheck yet: leave it ";
  if (l->alibi_max_distance < 0 || l->alibi_max_distance > ATTNCHECK_MAX_LIMIT_DISTANCE)
    refuse("alibi_max_distance", "alibi_max_distance = " + std::to_string(l->alibi_max_distance) + " must lie in [0, " +
                                     std::to_string(ATTNCHECK_MAX_LIMIT_DISTANCE) + "]");
  if (l->alibi_max_distance > 0 && l->alibi_max_distance + 1 < out.min_lk)
    refuse("alibi_max_distance", "alibi_max_distance = " + std::to_string(l->alibi_max_distance) +
                                     " is under min_lk - 1: no ALiBi case would be taken");
  out.alibi_max_distance = l->alibi_max_distance;
  if (l->alibi_slopes > ATTNCHECK_ALIBI_LIST)
    refuse("alibi_slopes", "alibi_slopes = " + std::to_string(l->alibi_slopes) + " is none of ATTNCHECK_ALIBI_* (0 to 2)");
  if (l->alibi_slopes == ATTNCHECK_ALIBI_LIST)
    refuse("alibi_slopes", std::string("a slope list") + later + "ATTNCHECK_ALIBI_ANY");
  if (l->alibi_slope_list || l->alibi_slope_count != 0)
    refuse("alibi_slope_list", "alibi_slope_list and alibi_slope_count belong to ATTNCHECK_ALIBI_LIST: NULL and 0");
  // The case's recipe holds max_bias in f32 (score_variants::alibi_max_bias): the declared one must be an f32.
  const double m = l->alibi_max_bias;
  if (l->alibi_slopes == ATTNCHECK_ALIBI_GEOMETRIC &&
      !(m > 0 && m <= ATTNCHECK_MAX_LIMIT_MAX_BIAS && static_cast<double>(static_cast<float>(m)) == m))
    refuse("alibi_max_bias", "alibi_max_bias = " + num(m) + " must lie in (0, " + std::to_string(ATTNCHECK_MAX_LIMIT_MAX_BIAS) +
                                 "] and be an f32 value (ggml's and BLOOM's rule; 8: the published slopes)");
  if (l->alibi_slopes == ATTNCHECK_ALIBI_ANY && l->alibi_max_bias != 0)
    refuse("alibi_max_bias", "alibi_max_bias belongs to ATTNCHECK_ALIBI_GEOMETRIC: 0 with ATTNCHECK_ALIBI_ANY");
  if (l->alibi_slopes == ATTNCHECK_ALIBI_GEOMETRIC) out.alibi_max_bias = m;
  return out;
}

}  // namespace attncheck
