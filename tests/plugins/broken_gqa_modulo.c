/* MUTANTS.md gqa_modulo: query head h reads KV head h % Hkv instead of h / G. */
#define EXAMPLE_KV_HEAD(h, group, hkv) ((h) % (hkv))
#include "example_subject.c"
