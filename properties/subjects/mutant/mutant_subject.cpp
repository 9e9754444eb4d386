// The mutation plugin: the bundled kernel's adapter (subjects/builtin) linked
// to attnimpl_mutation, the kernel with its deliberate bugs switchable at run
// time (impl/src/mutation.hpp). `attncheck mutation` gates it once per mutant:
//
//   attncheck gate --subject build/plugins/libattnimpl_mutant.so:mutant=gqa_modulo,tiles=tiny
//
// Options: mutant=NAME (default none: the correct kernel), plus the builtin's
// q_tile=, k_tile=, split_keys= (0: production) or tiles=tiny|production.
// Without tile options the plugin runs at the production tiles: a user's
// kernel cannot shrink its tiles, so neither does this subject by default.
//
// The kernel's switch (attnimpl::mutation::active) is one per process; each
// instance sets it to its own mutant at every entry, so two instances in one
// process never see each other's mutant.
#include <cstring>
#include <new>
#include <string>

#include "attncheck/subject.h"
#include "attncheck/bundled_subjects.hpp"
#include "attncheck/subject_host.hpp"
#include "../builtin/builtin_cache.hpp"
#include "mutation.hpp"  // impl/src: the mutation switch

namespace {

struct mutant_instance {
  attncheck::builtin::instance inner;  // first: desc.state of the inner descriptor points here
  attnimpl::mutation::id mutant = attnimpl::mutation::id::none;
  std::string mutant_name = "none";
  attncheck_instance desc{};  // the outer descriptor: entry points that set the switch first
};

mutant_instance* of(void* state) { return static_cast<mutant_instance*>(state); }
void activate(void* state) { attnimpl::mutation::active = of(state)->mutant; }

std::int64_t key_blocks(void* st, const attncheck_problem* p) {
  activate(st);
  return of(st)->inner.desc.key_blocks(&of(st)->inner, p);
}
int attend(void* st, const attncheck_problem* p, char* err, size_t len) {
  activate(st);
  return of(st)->inner.desc.attend(&of(st)->inner, p, err, len);
}
void* cache_create(void* st, const attncheck_cache_config* cfg, char* err, size_t len) {
  activate(st);
  return of(st)->inner.desc.cache_create(&of(st)->inner, cfg, err, len);
}
int cache_append(void* st, void* cache, const attncheck_tensor* k, const attncheck_tensor* v, int64_t c, const int64_t* count,
                 char* err, size_t len) {
  activate(st);
  return of(st)->inner.desc.cache_append(&of(st)->inner, cache, k, v, c, count, err, len);
}
int cache_attend(void* st, void* cache, const attncheck_problem* p, char* err, size_t len) {
  activate(st);
  return of(st)->inner.desc.cache_attend(&of(st)->inner, cache, p, err, len);
}
void cache_free(void* st, void* cache) {
  activate(st);
  of(st)->inner.desc.cache_free(&of(st)->inner, cache);
}
int attend_backward(void* st, const attncheck_backward_problem* p, char* err, size_t len) {
  activate(st);
  return of(st)->inner.desc.attend_backward(&of(st)->inner, p, err, len);
}
void backward_blocks(void* st, const attncheck_backward_problem* p, int64_t* dq_blocks, int64_t* dkv_blocks) {
  activate(st);
  of(st)->inner.desc.backward_blocks(&of(st)->inner, p, dq_blocks, dkv_blocks);
}
void destroy(attncheck_instance* self) { delete of(self->state); }

}  // namespace

// Version 4, as the builtin it wraps. The _v3 and _v2 symbols serve older
// hosts: the same instance labelled version 3 or 2, whose newer fields such a
// host never reads.
extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v4(const char* options, char* err,
                                                                                           size_t err_len);

extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v3(const char* options, char* err,
                                                                                           size_t err_len) {
  attncheck_instance* x = attncheck_subject_v4(options, err, err_len);
  if (x) x->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_3;
  return x;
}

extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v2(const char* options, char* err,
                                                                                           size_t err_len) {
  attncheck_instance* x = attncheck_subject_v4(options, err, err_len);
  if (x) x->abi_version = ATTNCHECK_SUBJECT_ABI_VERSION_2;
  return x;
}

extern "C" __attribute__((visibility("default"))) attncheck_instance* attncheck_subject_v4(const char* options, char* err,
                                                                                           size_t err_len) {
  auto* m = new (std::nothrow) mutant_instance{};
  if (!m) return nullptr;
  // mutant=NAME is ours; the rest goes to the builtin's option parser.
  std::string rest = options ? options : "", tiles;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    if (item.rfind("mutant=", 0) == 0) {
      const std::string name = item.substr(7);
      if (!attnimpl::mutation::select(name.c_str())) {
        attncheck::builtin::write_err(err, err_len, "mutant=" + name + ": no such mutant (see attnimpl_mutants)");
        delete m;
        return nullptr;
      }
      m->mutant = attnimpl::mutation::active;
      attnimpl::mutation::active = attnimpl::mutation::id::none;
      m->mutant_name = name.empty() ? "none" : name;
    } else {
      tiles += (tiles.empty() ? "" : ",") + item;
    }
  }
  std::string why;
  if (!attncheck::builtin::parse_options(tiles.c_str(), m->inner.tiles, why)) {
    attncheck::builtin::write_err(err, err_len, why);
    delete m;
    return nullptr;
  }
  attncheck::builtin::describe(m->inner, ("attnimpl-mutant " + m->mutant_name).c_str());
  m->desc = m->inner.desc;
  m->desc.state = m;
  m->desc.key_blocks = key_blocks;
  m->desc.attend = attend;
  m->desc.cache_create = m->inner.desc.cache_create ? cache_create : nullptr;
  m->desc.cache_append = m->inner.desc.cache_append ? cache_append : nullptr;
  m->desc.cache_attend = m->inner.desc.cache_attend ? cache_attend : nullptr;
  m->desc.cache_free = m->inner.desc.cache_free ? cache_free : nullptr;
  m->desc.attend_backward = m->inner.desc.attend_backward ? attend_backward : nullptr;
  m->desc.backward_blocks = m->inner.desc.backward_blocks ? backward_blocks : nullptr;
  m->desc.destroy = destroy;
  return &m->desc;
}

/// Every mutant this plugin can be switched to, null-terminated (for attncheck mutation).
extern "C" __attribute__((visibility("default"))) const char* const* attnimpl_mutants(void) {
  return attnimpl::mutation::names();
}
