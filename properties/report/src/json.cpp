// The gate's JSON file: the result model's codec (result_json.hpp) written out.
#include <fstream>

#include "attncheck/report.hpp"
#include "attncheck/result_json.hpp"

namespace attncheck {

void write_json(const std::string& path, const gate_result& r) {
  std::ofstream f(path);
  if (!f) throw input_error("--json", "cannot write '" + path + "'");
  f << to_json(r).dump(2) << "\n";
  if (!f) throw input_error("--json", "write to '" + path + "' failed");
}

}  // namespace attncheck
