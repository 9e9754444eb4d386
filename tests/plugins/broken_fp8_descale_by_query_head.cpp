// The naive subject indexing per-head K and V descales by the query head
// modulo the KV heads, not by h / G: right for MHA, wrong under GQA.
#define NAIVE_DESCALE_HEAD(g, h, hkv) ((h) % (hkv))
#include "naive/naive_subject.cpp"
