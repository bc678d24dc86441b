package ranks

// KindBuildError is a program that failed to build (a TensorRT engine whose
// fused node has no implementation): it never runs.
const KindBuildError = "build-error"
