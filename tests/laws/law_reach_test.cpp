// The laws reach what they claim: small in-process subjects, each correct but
// for one bug, fail exactly the law that names the bug; the same subject
// without the bug passes it (so a failure is the bug's, never the harness's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "attncheck/laws.hpp"
#include "attncheck/runner.hpp"
#include "attncheck/subject_host.hpp"
#include "test_instance.hpp"

namespace attncheck {
namespace {

enum class bug : int { none, leak_huge_future_key, lse_ignores_stride, cache_uses_first_count };

struct toy_state {
  bug b = bug::none;
};

float ld(const attncheck_tensor& t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  return static_cast<const float*>(t.data)[a * t.stride[0] + b * t.stride[1] + c * t.stride[2] + d * t.stride[3]];
}

// f32 attention, one row at a time, weights masked by selection. The bug
// leak_huge_future_key is a lazy rescale checked before the mask: a key whose
// score passes the visible maximum by more than 64 raises the max even when
// the row cannot see it. Random scores never do that and NaN compares false,
// so only a huge future key shows it (every visible weight underflows).
void toy_row(const toy_state& st, std::int64_t n_keys, std::int64_t d, std::int64_t dv, float scale,
             const std::function<float(std::int64_t)>& q, const std::function<float(std::int64_t, std::int64_t)>& k,
             const std::function<float(std::int64_t, std::int64_t)>& v, const std::function<bool(std::int64_t)>& vis, float* o,
             float* lse) {
  std::vector<float> s(static_cast<std::size_t>(n_keys));
  float m = -INFINITY;
  bool any = false;
  for (std::int64_t j = 0; j < n_keys; ++j) {
    float dot = 0;
    for (std::int64_t x = 0; x < d; ++x) dot += q(x) * k(j, x);
    s[static_cast<std::size_t>(j)] = dot * scale;
    if (vis(j)) any = true, m = std::fmax(m, s[static_cast<std::size_t>(j)]);
  }
  if (st.b == bug::leak_huge_future_key && any)
    for (std::int64_t j = 0; j < n_keys; ++j)
      if (!vis(j) && s[static_cast<std::size_t>(j)] > m + 64) m = s[static_cast<std::size_t>(j)];
  if (!any) {
    for (std::int64_t e = 0; e < dv; ++e) o[e] = 0;
    *lse = -INFINITY;
    return;
  }
  float sum = 0;
  for (std::int64_t j = 0; j < n_keys; ++j) {
    s[static_cast<std::size_t>(j)] = vis(j) ? std::exp(s[static_cast<std::size_t>(j)] - m) : 0.0f;
    sum += s[static_cast<std::size_t>(j)];
  }
  for (std::int64_t e = 0; e < dv; ++e) {
    float acc = 0;
    for (std::int64_t j = 0; j < n_keys; ++j)
      if (vis(j)) acc += s[static_cast<std::size_t>(j)] * v(j, e);
    o[e] = acc / sum;
  }
  *lse = m + std::log(sum);
}

void store_row(const attncheck_problem* p, const toy_state& st, std::int64_t b, std::int64_t h, std::int64_t i, const float* o,
               float lse) {
  auto* out = static_cast<float*>(p->o);
  for (std::int64_t e = 0; e < p->dv; ++e)
    out[b * p->o_stride[0] + i * p->o_stride[1] + h * p->o_stride[2] + e * p->o_stride[3]] = o[e];
  if (!p->lse) return;
  if (st.b == bug::lse_ignores_stride)
    p->lse[(b * p->hq + h) * p->lq + i] = lse;  // assumes dense (B, Hq, Lq)
  else
    p->lse[b * p->lse_stride[0] + h * p->lse_stride[1] + i * p->lse_stride[2]] = lse;
}

int toy_attend(void* state, const attncheck_problem* p, char*, size_t) {
  const auto& st = *static_cast<toy_state*>(state);
  std::vector<float> o(static_cast<std::size_t>(p->dv));
  const std::int64_t group = p->hq / p->hkv;
  for (std::int64_t b = 0; b < p->b; ++b) {
    const std::int64_t n = p->key_len ? p->key_len[b] : p->lk;
    for (std::int64_t h = 0; h < p->hq; ++h)
      for (std::int64_t i = 0; i < p->lq; ++i) {
        const std::int64_t g = h / group, pos = n - p->lq + i;
        float lse;
        toy_row(
            st, p->lk, p->d, p->dv, p->scale, [&](auto x) { return ld(p->q, b, i, h, x); },
            [&](auto j, auto x) { return ld(p->k, b, j, g, x); }, [&](auto j, auto e) { return ld(p->v, b, j, g, e); },
            [&](auto j) {
              if (j >= n || (p->causal && j > pos)) return false;
              return !p->mask ||
                     p->mask[b * p->mask_stride[0] + h * p->mask_stride[1] + i * p->mask_stride[2] + j * p->mask_stride[3]] != 0;
            },
            o.data(), &lse);
        store_row(p, st, b, h, i, o.data(), lse);
      }
  }
  return 0;
}

struct toy_cache {
  attncheck_cache_config cfg;
  std::vector<std::vector<float>> k, v;  // per sequence: capacity x hkv x d (dv)
  std::vector<std::int64_t> len;
};

void* toy_cache_create(void*, const attncheck_cache_config* cfg, char*, size_t) {
  auto* c = new toy_cache{*cfg, {}, {}, {}};
  c->k.assign(static_cast<std::size_t>(cfg->b), std::vector<float>(static_cast<std::size_t>(cfg->capacity * cfg->hkv * cfg->d)));
  c->v.assign(static_cast<std::size_t>(cfg->b), std::vector<float>(static_cast<std::size_t>(cfg->capacity * cfg->hkv * cfg->dv)));
  c->len.assign(static_cast<std::size_t>(cfg->b), 0);
  return c;
}

int toy_cache_append(void* state, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t,
                     const std::int64_t* count, char* err, size_t len) {
  const auto& st = *static_cast<toy_state*>(state);
  auto* c = static_cast<toy_cache*>(cache);
  const auto& f = c->cfg;
  for (std::int64_t b = 0; b < f.b; ++b) {
    // The bug: every sequence advances by the first sequence's count.
    const std::int64_t add = st.b == bug::cache_uses_first_count ? count[0] : count[b];
    auto& n = c->len[static_cast<std::size_t>(b)];
    if (n + add > f.capacity) {
      std::snprintf(err, len, "append beyond the capacity");
      return 1;
    }
    for (std::int64_t t = 0; t < add; ++t)
      for (std::int64_t g = 0; g < f.hkv; ++g) {
        for (std::int64_t x = 0; x < f.d; ++x)
          c->k[static_cast<std::size_t>(b)][static_cast<std::size_t>(((n + t) * f.hkv + g) * f.d + x)] = ld(*k, b, t, g, x);
        for (std::int64_t x = 0; x < f.dv; ++x)
          c->v[static_cast<std::size_t>(b)][static_cast<std::size_t>(((n + t) * f.hkv + g) * f.dv + x)] = ld(*v, b, t, g, x);
      }
    n += add;
  }
  return 0;
}

int toy_cache_attend(void* state, void* cache, const attncheck_problem* p, char*, size_t) {
  const auto& st = *static_cast<toy_state*>(state);
  auto* c = static_cast<toy_cache*>(cache);
  const auto& f = c->cfg;
  std::vector<float> o(static_cast<std::size_t>(p->dv));
  const std::int64_t group = p->hq / f.hkv;
  for (std::int64_t b = 0; b < p->b; ++b) {
    const std::int64_t n = c->len[static_cast<std::size_t>(b)];
    const auto& kb = c->k[static_cast<std::size_t>(b)];
    const auto& vb = c->v[static_cast<std::size_t>(b)];
    for (std::int64_t h = 0; h < p->hq; ++h)
      for (std::int64_t i = 0; i < p->lq; ++i) {
        const std::int64_t g = h / group, pos = n - p->lq + i;
        float lse;
        toy_row(
            st, n, p->d, p->dv, p->scale, [&](auto x) { return ld(p->q, b, i, h, x); },
            [&](auto j, auto x) { return kb[static_cast<std::size_t>((j * f.hkv + g) * f.d + x)]; },
            [&](auto j, auto e) { return vb[static_cast<std::size_t>((j * f.hkv + g) * f.dv + e)]; },
            [&](auto j) { return j < n && (!p->causal || j <= pos); }, o.data(), &lse);
        store_row(p, st, b, h, i, o.data(), lse);
      }
  }
  return 0;
}

void toy_cache_free(void*, void* cache) { delete static_cast<toy_cache*>(cache); }

void toy_destroy(attncheck_instance* self) {
  delete static_cast<toy_state*>(self->state);
  delete self;
}

std::shared_ptr<subject> toy(bug b) {
  auto* d = new attncheck_instance{f32_test_instance(ATTNCHECK_SUBJECT_ABI_VERSION_2, "toy-f32")};
  d->features = ATTNCHECK_FEATURE_CAUSAL | ATTNCHECK_FEATURE_PADDING | ATTNCHECK_FEATURE_MASK | ATTNCHECK_FEATURE_LSE |
                ATTNCHECK_FEATURE_CACHE;
  d->invariances = ATTNCHECK_CLAIM_DETERMINISTIC | ATTNCHECK_CLAIM_LAYOUT | ATTNCHECK_CLAIM_CACHE;
  d->state = new toy_state{b};
  d->attend = toy_attend;
  d->cache_create = toy_cache_create;
  d->cache_append = toy_cache_append;
  d->cache_attend = toy_cache_attend;
  d->cache_free = toy_cache_free;
  d->destroy = toy_destroy;
  return subject::adopt(d, "toy");
}

law_report run(const std::string& law_name, const subject& s) {
  const law* l = find_law(law_name);
  EXPECT_NE(l, nullptr) << law_name;
  run_options opt;
  opt.cases = 200;
  opt.seed = 7;
  opt.gen.law_work = 2'000'000;  // keep the oracle's share small
  return run_law(*l, s, opt);
}

void expect_caught(const std::string& law_name, bug b, const std::string& words) {
  const auto clean = run(law_name, *toy(bug::none));
  EXPECT_EQ(clean.v, verdict::pass) << law_name << " fails the toy without its bug: " << clean.failure.message;
  const auto r = run(law_name, *toy(b));
  ASSERT_EQ(r.v, verdict::fail) << law_name << " misses the bug";
  std::printf("caught: %s\n  case: %s\n  why:  %s\n", law_name.c_str(),
              r.counterexample ? to_line(*r.counterexample).c_str() : "-", r.failure.message.c_str());
  EXPECT_NE(r.failure.message.find(words), std::string::npos) << r.failure.message;
}

TEST(law_reach, causal_catches_a_max_over_huge_future_keys) {
  expect_caught("causal.future_keys_never_change_past_outputs", bug::leak_huge_future_key, "bits differ");
}

TEST(law_reach, layout_catches_an_lse_written_with_dense_strides) {
  expect_caught("determinism.same_bits_every_run_thread_count_layout", bug::lse_ignores_stride, "LSE");
}

TEST(law_reach, cache_catches_sequences_advanced_by_the_first_count) {
  expect_caught("cache.chunked_decode_equals_prefill", bug::cache_uses_first_count, "");
}

TEST(law_reach, nan_bound_rows_must_not_be_finite_garbage) {
  comparison c;
  c.element("nan truth", std::nan(""), 0.5, std::nan(""));
  EXPECT_FALSE(c.pass);
  comparison ok;
  ok.element("nan truth, nan got", std::nan(""), std::nan(""), std::nan(""));
  ok.element("finite truth under a NaN bound, inf got", 1.0, INFINITY, std::nan(""));
  ok.element("the oracle's own value", 0.25, 0.25, std::nan(""));
  ok.without_bound("empty row", std::nan(""), 0.0, 0.0);
  EXPECT_TRUE(ok.pass) << ok.failure;
  comparison unjudged;
  unjudged.element("finite truth, another finite value", 0.25, 0.5, std::nan(""));
  unjudged.element("outside the bound's domain", 0.25, std::nan(""), INFINITY);
  EXPECT_TRUE(unjudged.pass);
  EXPECT_EQ(unjudged.compared, 0);
  EXPECT_EQ(unjudged.unbounded, 2);
}

// An output that rounds to an infinity is accepted exactly when the bound
// reaches the overflow threshold on that infinity's side, whatever the truth's
// sign where the bound exceeds |truth| (an fp8 case with a wide V descale found it).
TEST(law_reach, an_infinite_output_is_judged_on_its_own_side_of_the_bound) {
  comparison c;
  c.overflow_threshold = 65520;
  c.element("positive truth, -inf, bound past it", 1.5e6, -INFINITY, 5.7e6);  // -4.2e6 <= -65520: allowed
  c.element("positive truth, +inf, bound reaches it", 6e4, INFINITY, 6000);   // 66000 >= 65520
  c.element("negative truth, -inf, bound reaches it", -6e4, -INFINITY, 6000);
  EXPECT_TRUE(c.pass) << c.failure;
  EXPECT_LE(c.max_ratio, 1.0);
  comparison wrong_side;
  wrong_side.overflow_threshold = 65520;
  wrong_side.element("positive truth, -inf, bound short of it", 6e4, -INFINITY, 6000);  // 54000 > -65520
  EXPECT_FALSE(wrong_side.pass);
  comparison short_of_it;
  short_of_it.overflow_threshold = 65520;
  short_of_it.element("positive truth, +inf, bound short of it", 5e4, INFINITY, 6000);
  EXPECT_FALSE(short_of_it.pass);
}

}  // namespace
}  // namespace attncheck
