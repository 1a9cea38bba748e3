"""The upstream tests that cannot pass on this package, by kind, for scripts/upstream-tests
(kept apart from it for its length): each reason is printed in docs/reference/upstream-tests.md beside
every test it matches."""

# What a rebuild on jax cannot mean, or means otherwise by design: (regex over a test's id
# and failure message, reason), the first that matches.
KNOWN = [
    (r"TestOpsErrorMessage", "asserts torch_xla's own rewording of errors; this package raises "
     "PyTorch's CPU messages (errors match PyTorch on the CPU)"),
    (r"XlaBackendTest\.test_allreduce_with_mesh\b", "builds a collective for a mocked world "
     "(rank 3 of 6, patched) over the replica groups {0,1},{2,3},{4,5} and reads its HLO text; "
     "here a collective's replica groups are checked against the runtime's real replicas (one "
     "here)"),
    (r"XlaBackendTest\.test_allgather_coalesced\b", "matches torch_xla's coalesced all-gather: "
     "one all-gather of both tensors, a tuple; here each tensor is gathered by an all-gather "
     "of its own"),
    (r"HloModule|custom_call_target=|%[a-z-]+\.\d+ = ", "asserts the text of torch_xla's own HLO "
     "lowering (its instruction numbering, parameter names, metadata); here HLO is jax's "
     "lowering, its instructions named by opcode as XLA's builders name them but numbered by "
     "XLA's conversion"),
    (r"TensorToData|CreateXlaTensor|DestroyXlaTensor|CreateCompileHandles|DeviceDataCacheMiss|"
     r"LazyTracing|ReplicateShardedData|xla::add|test_replace_xla_tensor\b",
     "reads counters of torch_xla's C++ internals (its tensor lifecycle, handles, per-op IR "
     "counters); this package counts compilations, executions, transfers and fallbacks"),
    (r"MetricsTest\.test_get_fallback_ops\b", "expects torchvision's nms and the nonzero and "
     "median of its remove_small_boxes to run through torch_xla's CPU fallback (3 fallback "
     "ops counted); here all three are lowered to XLA (`.item()` counts as "
     "aten::_local_scalar_dense in both)"),
    (r"No module named 'torchax'", "the file needs torchax, whose releases (0.0.4 to 0.0.13) do "
     "not import under the torch this package runs on (2.13+: they name aten.prod.dim_Dimname, "
     "gone); upstream's side has torchax 0.0.7 with torch 2.9"),
    (r"test_mp_pt_xla_debug\.py", "expects more than 8 Python frames above the sync (torch_xla's "
     "launch runs the function in a spawned process, several frames deep); here one device's "
     "function runs in the calling process, 5 frames deep, all listed"),
    (r"xla::[a-z_]+", "asserts the text of torch_xla's C++ IR nodes (xla::NAME); this package's "
     "IR names are ATen's (aten.NAME)"),
    (r"[Pp]allas|libtpu|TPU|_internal\.tpu", "TPU only (Pallas kernels, libtpu, the TPU VM's "
     "topology discovery in torch_xla._internal.tpu, which jax leaves to libtpu here)"),
    (r"test_unimplemented_op0", "allreduce_coalesced: torch_xla raises NotImplementedError, "
     "this package reduces the tensors"),
    (r"No module named 'torchvision'", "torchvision is not installable beside CI's CPU torch "
     "(give --ours-vision-python)"),
    (r"(cuda|CUDA|Neuron|NEURON)", "CUDA or Neuron build only"),
    (r"expected target dtype to be Long or Byte", "PyTorch on the CPU refuses this call with "
     "the same error (torch_xla's own kernel accepts a float target of another shape)"),
    (r"TestHloMetaData", "reads the user's Python stack of each op (HLO stack frames) and the "
     "op-name prefixes set on tensors (`_set_xla_custom_op_name_prefix`) in the metadata of "
     "torch_xla's lowering; the metadata of jax's HLO carries jax's scope names and the frames "
     "of the code that traced each op"),
    (r"test_binaryop_order", "mixes a CPU tensor "
     "into an op on XLA tensors, which torch_xla copies over; PyTorch refuses tensors on two "
     "devices (PyTorch's semantics)"),
    (r"ScanTest\.test_scan_computation_cache\b", "counts the calls of scan's step function: "
     "torch_xla traces it twice (its forward, then AOTAutograd's backward); here once, the "
     "backward being jax's vjp of that trace (both cache the result per function)"),
    (r"ScanTest\.test_scan_activation_aliases_input", "reads the tensors scan's autograd saves "
     "and expects the input xs itself among them; here the saved tensors are the residuals "
     "of jax's vjp of the loop"),
    (r"ScanTest\.test_scan_external_in_place_mutation", "a step function that changes an outer "
     "tensor in place is refused by both: torch_xla by an AssertionError of its FakeTensor "
     "tracing, this package by a RuntimeError saying to pass the tensor in and return it"),
    (r"DynamoSpmdInferenceTest\.test_dynamo_input_sharding_threashold", "expects the compiled "
     "graph's run to crash once its inputs' sharding changed more often than "
     "XLA_DYNAMO_INPUT_SHARDING_CHECK_THRESHOLD allows; here each new layout compiles its "
     "own program, and the run succeeds"),
    (r"XLAExportInterpreterTest\.test_constant_wrapping", "matches the text of torch_xla's "
     "lowering of `1.0 - x`: a splat constant of x's shape (`stablehlo.constant ... : "
     "tensor<2x3xf32>`); here the scalar is a constant of its own (`tensor<f32>`) broadcast "
     "to x's shape (`stablehlo.broadcast_in_dim`), as jax lowers it: inlined in the program "
     "either way, the same values"),
    (r"DynamoErrorMessageTest\.test_mixed_cpu_tensor", "expects the words of torch_xla's "
     "dynamo bridge ('found two different devices'); here a compiled model given tensors of "
     "two devices raises PyTorch's own error, as eager PyTorch does ('Expected all tensors "
     "to be on the same device, but found at least two devices')"),
    (r"test_flip_check_throws|Expected reduction dim \d+ to have non-zero size", "expects a "
     "RuntimeError where PyTorch's CPU kernel raises IndexError (a dim out of range, a "
     "reduction along an empty dim): PyTorch's semantics"),
    (r"test_clip_grad_norm_zero", "clip_grad_norm_ of tensors without gradients returns "
     "PyTorch's CPU tensor(0.); torch_xla patches PyTorch's function to return it on the "
     "XLA device"),
    (r"test_special_scalars_addcdiv_addcmul", "expects the 1.0 of `addcmul(..., value=1.0)` "
     "to be a constant of the program (torch_xla's special scalars, 0 and 1); here every "
     "Python number at a Scalar argument is a parameter, so a value that passes through 0 or "
     "1 (a learning rate warming up from 0) does not compile programs of its own, and "
     "replicas whose scalars differ (`x * (rank + 1)`) still run one program"),
    (r"TestMultiCpu\w*\.test_multi_cpu_(devices|backwards)|TestExperimentalPjrtMultiCpu\.test_multi_cpu_(devices|backwards)",
     "torch_xla drives a CPU's devices by one thread each in one process (each thread's "
     "device xla:N); here every device has a process of its own, whose device is xla:0"),
    (r"nms_kernel", "torchvision's own CPU kernel words this error; torch_xla's NMS lowering "
     "words it otherwise"),
    (r"StableHloDumpTest\.test_resnet18", "counts stablehlo.convolution in ResNet-18's program "
     "(20); here a 1x1 convolution without padding or groups is lowered as a matrix product "
     "(17: XLA's CPU backend runs it ~5 x faster so)"),
    (r"export_for_training", "torch.export.export_for_training is gone from the torch this "
     "package runs on (2.13+); upstream's test needs torch 2.9"),
    (r"test_bmm_dynamic_out_dim", "asserts the order torch_xla's lazy lowering gives the "
     "module's parameters (the operand with the dynamic dim first, the other tests of that "
     "order are skipped upstream); here the module takes the program's inputs in their "
     "order, as its input_locations say"),
    (r"TestOpInfoXLA\.test_fallback_", "asserts the ops torch_xla runs through its CPU fallback "
     "(nonzero, unique, embedding_bag, grid_sampler_2d, repeat_interleave, scatter_reduce "
     "mean); here they are lowered to XLA"),
    (r"test_reference_eager_mode_xla", "torch.mode's index among equal values: PyTorch's CPU "
     "kernel picks it by an unstable sort on long rows (its docs leave it unspecified); "
     "upstream runs mode on the CPU, this package on XLA (the last occurrence)"),
    (r"test_einsum_lowered", "PyTorch refuses this einsum ('...n,mn->...m' of a 3x5 and a "
     "5x7: n is 5 and 7), as this package does; torch_xla's lowering computes something"),
    (r"test_einsum_not_lowered", "torch_xla decomposes an einsum whose gradient is no einsum "
     "('ab,bc->ab'); here every einsum is one op, its gradient jax's"),
    (r"test_datatype_use_bf16", "XLA_USE_BF16 (set after import): this package follows the "
     "tutorial it was built from, where t.dtype says bfloat16; torch_xla keeps the original "
     "dtype (the file's other tests stop with it: failfast)"),
    (r"test_aliasing_with_cloned|test_user_config_donation_with_ltc_donation_overlap",
     "reads InputOutputAliasCount, sampled when a program is compiled: here `t += 2` runs the "
     "program compiled for an earlier test's `t += 1` (scalars are parameters), and a clone "
     "shares its source's buffer, which is then kept, not donated"),
    (r"TestPlaceholder\.test_trace_graph", "matches the entry signature of torch_xla's HLO "
     "(parameters p0..., one tuple result); jax names the parameters after the program's "
     "arguments and returns a single result as it is"),
    (r"test_error_mutated_input_tensors", "expects gradient_accumulation to refuse a step that "
     "changes an input in place; here the change is carried through the loop (a counter "
     "incremented by each of 4 steps reads 4, as the steps run one by one would leave it)"),
    (r"test_dropout_by_u8_mask", "asserts the u8 mask of torch_xla's dropout lowering in its "
     "HLO; here the mask is PyTorch's bool, drawn from 32-bit random bits"),
    (r"TestDynamoBufferDonationAliasingWithCustomOp\.test_manual_buffer_donation", "counts "
     "XlaSetBufferDonation twice: torch_xla's op counts dynamo's call on a fake tensor too; "
     "here only the marking of a real buffer counts"),
    (r"test_dynamic_shape_mix_with_non_dynamic", "passes alone; after the file's earlier tests "
     "the dynamo of torch 2.13+ reuses the dynamic-batch graph an earlier nn.Linear of the "
     "same shapes compiled (modules' parameters are graph inputs there), so nothing is "
     "extracted again"),
    (r"test_rendezvous_default_payload_cpu_transfers", "counts the transfer of the payload "
     "sizes torch_xla exchanges on the device even for a lone replica; here a lone replica "
     "(one CPU process) exchanges nothing"),
    (r"TestAutocastXla\.test_(einsum|patchedlinear_autocast)", "asserts no float32 dot in the "
     "HLO under bf16 autocast; here a bfloat16 product accumulates in float32 and rounds once "
     "(a float32 dot, then a convert), as PyTorch's CPU kernels compute it"),
    (r"DTensorIntegrationTest3\.test_xla_placement", "reads `.global_tensor` of a `.cpu()` "
     "copy: torch_xla wraps every result of an op on an XLAShardedTensor, a CPU copy too; here "
     "a CPU copy is a plain CPU tensor"),
    (r"use_spmd\(auto=True\)", "XLA's auto-sharding pass: jax's compile API does not reach "
     "it (jax 0.10 has no AUTO sharding; shardings are given with mark_sharding)"),
    (r"BasicXlaShardingTest\.test_(mark_manual_sharding|spmd_full_to_shard_shape|"
     r"spmd_shard_to_full_shape)\b", "marks a tensor manual outside a manual region and reads "
     "the numbered custom-calls of torch_xla's HLO of it; here a manual value exists only "
     "inside a region's program (enable_manual_sharding to disable_manual_sharding), "
     "elsewhere refused, and HLO is jax's"),
    (r"BasicXlaShardingTest\.test_fallback\b", "asserts that torch.polar runs through torch_xla's "
     "CPU fallback (its result a tensor on the host); here polar is lowered to XLA"),
    (r"DynamoCpuFallbackTest\.test_fallback_multiple_submodules", "counts the executions of "
     "torch_xla's graph partitions around a CPU-fallback op (5); here a captured graph holding "
     "an op with no lowering runs op by op on the lazy path (3)"),
    (r"QuantizedTest\.test_int4_per_channel_matmul\b", "asserts a dot of a bf16 and an s4 "
     "operand in the CPU's HLO, a program upstream never runs on the CPU (its int4 products "
     "run on TPU only): XLA's CPU compiler rejects an s4 dot operand (the widened copy keeps "
     "its 4-bit element size), so here the CPU's program widens the int4 weight to bf16 "
     "before the dot and int4 layers run on the CPU too; on TPU the dot reads the s4 weight"),
    (r"TestDynamicShapes\.test_(add|sub)_two_dynamic_tensors\b", "adds (subtracts) two "
     "nonzero results of equal real sizes (4 rows each, bounds 6) and expects a RuntimeError; "
     "PyTorch adds them (its own semantics), as this package does: sizes that must agree but "
     "are not the same size are read from the device at the op (the other cases, whose real "
     "sizes differ or broadcast against a dynamic 1, raise here too)"),
    (r"TestDynamicShapes\.test_SizeEq_should_not_compile_for_identical_symints", "expects one "
     "compilation for comparing a size with itself, which its own comment calls a wart to be "
     "removed (its TODO: assert no compilation); here a size equals itself without the device, "
     "so nothing compiles (and metric_data('CompileTime') is None)"),
    (r"XlaMlirDebuginfoTest\.test_write_debuginfo", "expects the name as an op's whole "
     "location, printed on the op's line; jax's location of an op is its scope path, the name "
     "among it (`jit(module)/MY_ADD/add`), printed as an alias after the module"),
    (r"XlaMlirDebuginfoTest\.test_export_node_metadata", "reads `source_fn_stack` among the "
     "exported nodes' metadata, which torch.export no longer records on the torch this package "
     "runs on (2.13+: `torch_fn`, which the locations carry)"),
]
