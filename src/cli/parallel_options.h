// --tp / --pp: tensor and pipeline parallelism across the ranks of an MPI run
// (model/tensor_parallel.h, model/pipeline_parallel.h, dist/). `mpirun -np T·P peregrine
// generate --tp T --pp P ...`: rank = stage · T + tp_rank; every rank loads its part of the same
// model file and runs the same verb; rank 0 prints, the others are silent except for their errors.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>

#include "common.h"

namespace peregrine::cli {

/// Adds --tp N (tensor-parallel ranks per stage) and --pp N (pipeline stages), default 1, to `cmd`.
void add_parallel_options(CLI::App& cmd, ModelOptions& o);

/// For o.tp · o.pp > 1: joins the MPI run (dist/mpi_world.h), checks that it has exactly
/// o.tp · o.pp ranks, and on every rank but 0 sends stdout and stderr to /dev/null (report()
/// still reaches the terminal, through error_stream()). Nothing in a one-process run. Errors:
/// kInvalidArgument (a run with another number of ranks: the message says how to start it),
/// kUnavailable (a build without MPI).
Status start_parallel_run(const ModelOptions& o);

/// serve --role prefill | decode (disaggregated serving, dist/mpi_prefill.h): joins the MPI run,
/// which must be two ranks started with one role each (`mpirun -np 1 peregrine serve --role
/// decode ... : -np 1 peregrine serve --role prefill ...`), silences the prefill rank and returns
/// the other rank. Errors: kInvalidArgument (another number of ranks, or two ranks of one role:
/// the message says how to start it), kUnavailable (a build without MPI).
Expected<int> start_disaggregated_run(const std::string& role);

/// This rank's part of `file`: shard_model_file(shard_pipeline_stage(file, stage, o.pp),
/// tp_rank, o.tp); `file` itself in a one-process run.
Expected<ModelFile> shard_for_run(ModelFile file, const ModelOptions& o);

/// This rank's part of a LoRA adapter for the whole model (config `whole`):
/// shard_lora_adapter(stage_lora_adapter(adapter, stage, o.pp), tp_rank, o.tp), matching
/// shard_for_run's file; the adapter itself in a one-process run.
Expected<LoraAdapter> lora_for_run(LoraAdapter adapter, const ModelConfig& whole, const ModelOptions& o);

/// Joins `model` (made from shard_for_run's file) to this rank's tensor-parallel group (o.tp > 1)
/// and pipeline link (o.pp > 1), collectively over the run. Errors: those of
/// MpiWorld::tensor_parallel_group / pipeline_stage_link and LlamaModel::set_tensor_parallel /
/// set_pipeline_stage.
Status attach_parallel(LlamaModel& model, const ModelOptions& o);

/// Where error lines go: stderr, or on a silenced rank the terminal's stderr it had before.
std::FILE* error_stream();

/// In a multi-rank run, ends every rank (MPI_Abort): called after an error line, so that no
/// rank waits for the failed one in a collective. Nothing in a one-process run.
void end_run_on_error(int code);

}  // namespace peregrine::cli
