// The contract's feature table (attncheck/features.hpp) as Python sees it:
// attncheck._core.contract_features() and, inside the bridge plugin's
// embedded interpreter, attncheck_features.contract_features(). The Python
// package derives its feature names, ABI bits and keywords from it.
#pragma once

#include <pybind11/pybind11.h>

#include "attncheck/features.hpp"

namespace attncheck::python {

inline const char* kind_name(feature_kind k) {
  switch (k) {
    case feature_kind::mask: return "mask";
    case feature_kind::output: return "output";
    case feature_kind::variant: return "variant";
    case feature_kind::input_form: return "input_form";
    case feature_kind::backward: return "backward";
    case feature_kind::storage: return "storage";
  }
  return "?";
}

/// One dict per feature, in table order: name, kind, abi_word, bit, python_declarable, python_keywords.
inline pybind11::list contract_feature_dicts() {
  pybind11::list out;
  for (const contract_feature& f : contract_features()) {
    pybind11::dict d;
    d["name"] = f.name;
    d["kind"] = kind_name(f.kind);
    d["abi_word"] = f.abi_word;
    d["bit"] = f.bit;
    d["python_declarable"] = f.python_declarable;
    pybind11::list keywords;
    for (const std::string& k : f.python_keywords) keywords.append(k);
    d["python_keywords"] = keywords;
    out.append(d);
  }
  return out;
}

}  // namespace attncheck::python
