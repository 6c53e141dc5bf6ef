#include "parallel_options.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "peregrine/dist/mpi_world.h"
#include "peregrine/model/pipeline_parallel.h"
#include "peregrine/model/tensor_parallel.h"

namespace peregrine::cli {
namespace {

std::FILE* g_error_stream = nullptr;  // the saved terminal stderr of a silenced rank

// stdout and stderr of this process to /dev/null, keeping a copy of stderr for error lines.
void silence_rank() {
  const int saved = ::dup(STDERR_FILENO);
  if (saved >= 0) g_error_stream = ::fdopen(saved, "w");
  const int null = ::open("/dev/null", O_WRONLY);
  if (null < 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(null, STDOUT_FILENO);
  ::dup2(null, STDERR_FILENO);
  ::close(null);
}

// The ranks mpirun started this process among (Open MPI's OMPI_COMM_WORLD_SIZE, PMI's
// PMI_SIZE), or 1 without mpirun: read before MPI is initialized, which a process started alone
// would do as a "singleton" (slowly, and with Open MPI's warnings).
int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 1;
}

}  // namespace

void add_parallel_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("--tp", o.tp,
                 "Tensor-parallel ranks: run as `mpirun -np N peregrine ... --tp N`; each rank holds 1/N of "
                 "every layer's heads and FFN columns (Megatron-LM), two all-reduces per layer")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--pp", o.pp,
                 "Pipeline stages: each holds a contiguous range of the layers and hands the residual stream to the "
                 "next; with --tp, run as `mpirun -np TP·PP`")
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--pp-micro-batches", o.pp_micro_batches,
                 "With --pp: cut a batch of several sequences (serve) into up to N micro-batches that follow each other "
                 "through the stages, so that the stages overlap (GPipe); 0 = one per stage")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
}

Status start_parallel_run(const ModelOptions& o) {
  const int ranks = o.tp * o.pp;
  if (ranks == 1) return Status::ok();
  const auto wrong_size = [&](int have) {
    const std::string flags = o.pp == 1 ? "--tp " + std::to_string(o.tp)
                              : o.tp == 1 ? "--pp " + std::to_string(o.pp)
                                          : "--tp " + std::to_string(o.tp) + " --pp " + std::to_string(o.pp);
    return invalid_argument(flags + " runs as " + std::to_string(ranks) + " MPI ranks: start it with `mpirun -np " + std::to_string(ranks) +
                            " peregrine ...` (this run has " + std::to_string(have) + ")");
  };
  if (launched_ranks() != ranks) return wrong_size(launched_ranks());
  PEREGRINE_ASSIGN_OR_RETURN(MpiWorld * world, mpi_world());
  if (world->size() != ranks) return wrong_size(world->size());
  if (world->rank() > 0) silence_rank();
  return Status::ok();
}

Expected<int> start_disaggregated_run(const std::string& role) {
  const auto wrong = [](const std::string& what) {
    return invalid_argument("serve --role runs as two MPI ranks, one of each role: start it with `mpirun -np 1 peregrine serve "
                            "--role decode ... : -np 1 peregrine serve --role prefill ...` (" + what + ")");
  };
  if (launched_ranks() != 2) return wrong("this run has " + std::to_string(launched_ranks()) + " ranks");
  PEREGRINE_ASSIGN_OR_RETURN(MpiWorld * world, mpi_world());
  const std::vector<std::int64_t> roles = world->all_gather(role == "prefill" ? 1 : 2);
  if (roles.size() != 2 || roles[0] == roles[1]) return wrong("both ranks are " + role + " instances");
  if (role == "prefill") silence_rank();
  return 1 - world->rank();
}

Expected<ModelFile> shard_for_run(ModelFile file, const ModelOptions& o) {
  if (o.tp * o.pp == 1) return file;
  PEREGRINE_ASSIGN_OR_RETURN(MpiWorld * world, mpi_world());
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile stage, shard_pipeline_stage(file, world->rank() / o.tp, o.pp));
  return shard_model_file(stage, world->rank() % o.tp, o.tp);
}

Expected<LoraAdapter> lora_for_run(LoraAdapter adapter, const ModelConfig& whole, const ModelOptions& o) {
  if (o.tp * o.pp == 1) return adapter;
  PEREGRINE_ASSIGN_OR_RETURN(MpiWorld * world, mpi_world());
  const int stage = world->rank() / o.tp;
  PEREGRINE_ASSIGN_OR_RETURN(LoraAdapter staged, stage_lora_adapter(adapter, whole.n_layers, stage, o.pp));
  return shard_lora_adapter(staged, whole, world->rank() % o.tp, o.tp);  // a stage splits as the whole model does
}

Status attach_parallel(LlamaModel& model, const ModelOptions& o) {
  if (o.tp * o.pp == 1) return Status::ok();
  PEREGRINE_ASSIGN_OR_RETURN(MpiWorld * world, mpi_world());
  if (o.tp > 1) {
    PEREGRINE_ASSIGN_OR_RETURN(auto group, world->tensor_parallel_group(o.tp));
    PEREGRINE_RETURN_IF_ERROR(model.set_tensor_parallel(std::move(group)));
  }
  if (o.pp == 1) return Status::ok();
  PEREGRINE_ASSIGN_OR_RETURN(auto link, world->pipeline_stage_link(o.tp, o.pp));
  PEREGRINE_RETURN_IF_ERROR(model.set_pipeline_stage(std::move(link)));
  return model.set_pipeline_micro_batches(o.pp_micro_batches);
}

std::FILE* error_stream() { return g_error_stream != nullptr ? g_error_stream : stderr; }

void end_run_on_error(int code) {
  if (!in_multi_rank_run()) return;
  std::fflush(error_stream());
  (*mpi_world())->abort(code);
}

}  // namespace peregrine::cli
