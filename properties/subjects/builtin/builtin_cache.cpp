#include "builtin_cache.hpp"

#include <algorithm>
#include <new>
#include <optional>
#include <vector>

#include "attnimpl/kv_cache.hpp"

namespace attncheck::builtin {

namespace {

struct cache_handle {
  const instance* owner;
  attncheck_dtype dtype;
  std::optional<attnimpl::paged_kv_cache> cache;
};

void* create(void* state, const attncheck_cache_config* cfg, char* err, std::size_t err_len) {
  if (cfg->b < 1 || cfg->page_size < 1 || cfg->capacity < 0) {
    write_err(err, err_len, "cache config: b and page_size must be >= 1, capacity >= 0");
    return nullptr;
  }
  attnimpl::kv_cache_config c;
  c.batch = cfg->b, c.hkv = cfg->hkv, c.d = cfg->d, c.dv = cfg->dv;
  c.type = to_impl(cfg->dtype);
  c.page_size = cfg->page_size;
  c.max_pages_per_seq = (cfg->capacity + cfg->page_size - 1) / cfg->page_size;
  c.pages = std::max<std::int64_t>(1, c.max_pages_per_seq * cfg->b);
  c.max_pages_per_seq = std::max<std::int64_t>(1, c.max_pages_per_seq);
  std::vector<std::int32_t> order;
  if (cfg->page_order) {
    if (cfg->page_count != c.pages) {
      write_err(err, err_len, "page_order must list every page of the pool (b * ceil(capacity / page_size))");
      return nullptr;
    }
    for (std::int64_t i = 0; i < cfg->page_count; ++i) order.push_back(static_cast<std::int32_t>(cfg->page_order[i]));
  }
  auto* h = new (std::nothrow) cache_handle{static_cast<const instance*>(state), cfg->dtype, std::nullopt};
  if (!h) return nullptr;
  const auto st = attnimpl::paged_kv_cache::create(c, std::move(order), h->cache);
  if (!st.ok()) {
    write_err(err, err_len, st.message);
    delete h;
    return nullptr;
  }
  return h;
}

int append(void*, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, std::int64_t, const std::int64_t* count,
           char* err, std::size_t err_len) {
  auto* h = static_cast<cache_handle*>(cache);
  const std::size_t width = h->dtype == ATTNCHECK_F32 ? 4 : 2;
  for (std::int64_t b = 0; b < h->cache->config_used().batch; ++b) {
    attnimpl::kv_tokens t;
    t.k = static_cast<const unsigned char*>(k->data) + static_cast<std::size_t>(b * k->stride[0]) * width;
    t.k_stride = {k->stride[1], k->stride[2], k->stride[3]};
    t.v = static_cast<const unsigned char*>(v->data) + static_cast<std::size_t>(b * v->stride[0]) * width;
    t.v_stride = {v->stride[1], v->stride[2], v->stride[3]};
    const auto st = h->cache->append(b, count[b], t);
    if (!st.ok()) {
      write_err(err, err_len, st.message);
      return 1;
    }
  }
  return 0;
}

int attend(void*, void* cache, const attncheck_problem* p, char* err, std::size_t err_len) {
  auto* h = static_cast<cache_handle*>(cache);
  attnimpl::cache_attention_args a;
  a.hq = p->hq;
  a.lq = p->lq;
  const auto t = to_impl(p->dtype);
  a.q = {p->q.data, t, {p->q.stride[0], p->q.stride[1], p->q.stride[2], p->q.stride[3]}};
  a.o = {p->o, t, {p->o_stride[0], p->o_stride[1], p->o_stride[2], p->o_stride[3]}};
  if (p->lse) a.lse = {p->lse, {p->lse_stride[0], p->lse_stride[1], p->lse_stride[2]}};
  a.scale = p->scale;
  a.causal = p->causal != 0;
  a.var = variants_of(p);
  const auto st = h->cache->attend(a, config_for(h->owner, p));
  if (!st.ok()) {
    write_err(err, err_len, st.message);
    return 1;
  }
  return 0;
}

void release(void*, void* cache) { delete static_cast<cache_handle*>(cache); }

}  // namespace

void install_cache(attncheck_instance& d) {
  d.features |= ATTNCHECK_FEATURE_CACHE;
  // Same engine, key blocks at fixed absolute positions: prefill == any chunking, bit for bit.
  d.invariances |= ATTNCHECK_CLAIM_CACHE;
  d.cache_create = create;
  d.cache_append = append;
  d.cache_attend = attend;
  d.cache_free = release;
}

}  // namespace attncheck::builtin
