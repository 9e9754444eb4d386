// attncheck campaign: soundness and tightness of the bound of docs/bound.md at scale.
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "attncheck/campaign.hpp"
#include "attncheck/report_html.hpp"
#include "cli_state.hpp"
#include "commands.hpp"

namespace attncheck::cli {

namespace {
campaign_options copt;
std::string type_name;
std::string html_path;
std::string json_path;
std::string shard_text;

int run_campaign_cmd() {
  if (!type_name.empty()) {
    copt.only_type = parse_dtype(type_name);
    if (!copt.only_type) throw input_error("--dtype", "'" + type_name + "' is not one of f32, f16, bf16");
  }
  if (!shard_text.empty()) parse_shard(shard_text, copt);
  // Refuses an unwritable --json before the run, not after it.
  if (!json_path.empty() && !std::ofstream(json_path, std::ios::app))
    throw input_error("--json", "cannot write '" + json_path + "'");
  // Progress on standard error: in place on a terminal, plain periodic lines otherwise (CI logs).
  copt.progress = &std::cerr;
  copt.progress_tty = isatty(STDERR_FILENO) != 0;
  const campaign_result r = run_campaign(copt, std::cout);
  if (!html_path.empty()) {
    html::write_campaign_html(html_path, copt, r);
    std::cout << "report: " << html_path << "\n";
  }
  return finish_campaign(r, json_path);
}
}  // namespace

int finish_campaign(const campaign_result& r, const std::string& json_path) {
  if (!json_path.empty()) {
    write_campaign_json(json_path, r);
    std::cout << "results: " << json_path << "\n";
  }
  return r.violations() ? 1 : 0;
}

void add_campaign(CLI::App& app) {
  auto* c =
      app.add_subcommand("campaign", "Differential law on N generated cases: violations, observed/bound histogram per dtype");
  c->add_option("--cases", copt.cases, "number of cases (default 10000)")
      ->check(number_in(std::int64_t{1}, std::int64_t{1} << 40));
  c->add_option("--subject", copt.subject,
                "NAME|PATH[:key=value,...]: builtin (default), builtin:tiles=tiny, naive, or a plugin .so[:options]");
  c->add_option("--seed", copt.seed, "case k is drawn with seed + k");
  c->add_option("--shard", shard_text,
                "i/N: run only the cases k with k % N = i (0 <= i < N <= " + std::to_string(max_shards) +
                    ", N <= --cases); the N shards together are the unsharded run (attncheck merge)");
  c->add_option("--json", json_path,
                "write the results here as JSON (configuration, per-dtype histograms, violations, worst cases, cases/s)");
  c->add_option("--jobs", copt.jobs, "forked workers (default 1)")->check(number_in(1, 64));
  c->add_option("--dtype", type_name, "only this storage type: f32, f16 or bf16 (default: the generator's mix)");
  c->add_option("--max-work", copt.max_work, "largest B*Hq*Lq*Lk*(D+Dv) of a case (default 200000)")
      ->check(number_in(std::int64_t{16}, run_default::max_work_limit));
  c->add_flag("--variants", copt.variants,
              "also draw the contract 1.1 variants the subject declares (window, chunk, softcap, sinks, ALiBi, bias) as the "
              "gate's differential law does: half the cases, each capped at B*Hq*Lq*Lk*(D+Dv) <= " +
                  std::to_string(run_default::variant_max_work) +
                  "; reports cases, elements, violations and the largest observed/bound per feature");
  c->add_flag("--fp8", copt.fp8,
              "also draw fp8 inputs with descales (e4m3, e5m2; tensor and head descales; the descale recipes) as the gate's "
              "differential law does for a subject that declares them: half the cases; reports the largest observed/bound "
              "per fp8 input type");
  c->add_option("--form", copt.form,
                "paged or ragged: every case in that contract 1.2 input form, drawn as the paged and ragged laws draw it "
                "(page sizes 1..512 and boundaries, table tails, spare and shared pages; zero, one and long sequences), "
                "judged against the oracle of the dense problem; the subject must declare the form");
  c->add_flag("--backward", copt.backward,
              "judge the backward pass: every case drawn and cut as backward.gradients_within_bound_of_oracle draws it "
              "(contract 1.0, B*Hq*Lq*Lk*(D+Dv) <= 3000, a dO recipe), dQ, dK and dV against the backward oracle within the "
              "backward bound, per dtype and per gradient, beside what PyTorch's 180x and FlashAttention's 2x fudge-factor "
              "rules accept on the same cases; the subject must declare backward. With --variants: drawn as "
              "backward.variant_gradients_within_bound_of_oracle draws them (every declared variant), d(sink) judged as a "
              "fourth gradient, dSink, and no fudge-factor comparison (its reference covers contract 1.0 only); the subject "
              "must declare FEATURE3_BACKWARD_VARIANTS");
  c->add_option("--out", copt.out_dir, "save violating cases here");
  c->add_option("--html", html_path,
                "write a self-contained HTML report here (per-dtype histograms, worst cases, rate, oracle tiers)");
  c->add_option("--progress-seconds", copt.progress_seconds, "seconds between progress lines when not on a terminal (default 5)")
      ->check(number_in(0.1, 3600.0));
  register_runner(c, run_campaign_cmd);
}

}  // namespace attncheck::cli
