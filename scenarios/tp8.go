package scenarios

// tp8-shared-expert is written as a scenario file,
// builtin/tp8-shared-expert.yaml, registered with the other embedded files
// (yaml_builtin.go): TensorRT-LLM PR #14917 (nvbugs/6248757), the shared
// expert's trailing all-reduce on the aux stream at TP=8 on SM100. The file
// uses the MoE graph builder (BuildMoE) with the knobs of the original Go
// definition, so its verdicts and trace hashes are unchanged
// (TestTP8YAMLMatchesGo).
