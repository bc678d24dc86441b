package scenarios

import "github.com/collsim/collsim/scenarios/format"

// The scenario-file format lives in package format; these names keep its
// callers' spelling (scenarios.Spec, scenarios.ParseSpec, ...).

type (
	CaptureSpec    = format.CaptureSpec
	CommSpec       = format.CommSpec
	Comparison     = format.Comparison
	Cond           = format.Cond
	Error          = format.Error
	ErrorList      = format.ErrorList
	ExpectSpec     = format.ExpectSpec
	Expr           = format.Expr
	FlagSpec       = format.FlagSpec
	GraphOpSpec    = format.GraphOpSpec
	GraphSpec      = format.GraphSpec
	HostScalarSpec = format.HostScalarSpec
	ModelOpSpec    = format.ModelOpSpec
	ModelSpec      = format.ModelSpec
	OpKind         = format.OpKind
	OpSpec         = format.OpSpec
	ParamSpec      = format.ParamSpec
	PatchSpec      = format.PatchSpec
	Pos            = format.Pos
	ProgramSpec    = format.ProgramSpec
	RankSet        = format.RankSet
	RefSpec        = format.RefSpec
	RepeatSpec     = format.RepeatSpec
	Spec           = format.Spec
	SymmSpec       = format.SymmSpec
	TensorSpec     = format.TensorSpec
)

const (
	MaxBlocks          = format.MaxBlocks
	MaxCaptures        = format.MaxCaptures
	MaxChunks          = format.MaxChunks
	MaxCommsPerFile    = format.MaxCommsPerFile
	MaxDepth           = format.MaxDepth
	MaxErrors          = format.MaxErrors
	MaxEvents          = format.MaxEvents
	MaxExpandedNodes   = format.MaxExpandedNodes
	MaxFileBytes       = format.MaxFileBytes
	MaxHostScalars     = format.MaxHostScalars
	MaxKernelBlocks    = format.MaxKernelBlocks
	MaxNameLen         = format.MaxNameLen
	MaxOps             = format.MaxOps
	MaxParams          = format.MaxParams
	MaxRanks           = format.MaxRanks
	MaxRepeat          = format.MaxRepeat
	MaxReplays         = format.MaxReplays
	MaxStreams         = format.MaxStreams
	MaxTasks           = format.MaxTasks
	MaxTensorBytes     = format.MaxTensorBytes
	MaxTensorChunks    = format.MaxTensorChunks
	MaxTensors         = format.MaxTensors
	MaxTokens          = format.MaxTokens
	MaxVariants        = format.MaxVariants
	OpAdvance          = format.OpAdvance
	OpAllGather        = format.OpAllGather
	OpAllReduce        = format.OpAllReduce
	OpAllToAll         = format.OpAllToAll
	OpAlloc            = format.OpAlloc
	OpAwait            = format.OpAwait
	OpBroadcast        = format.OpBroadcast
	OpCapture          = format.OpCapture
	OpEmptyCache       = format.OpEmptyCache
	OpFill             = format.OpFill
	OpFree             = format.OpFree
	OpIncrement        = format.OpIncrement
	OpKernel           = format.OpKernel
	OpPut              = format.OpPut
	OpRecord           = format.OpRecord
	OpRecordStream     = format.OpRecordStream
	OpRecv             = format.OpRecv
	OpReduceScatter    = format.OpReduceScatter
	OpRegister         = format.OpRegister
	OpRepeat           = format.OpRepeat
	OpReplay           = format.OpReplay
	OpReset            = format.OpReset
	OpSend             = format.OpSend
	OpSync             = format.OpSync
	OpWait             = format.OpWait
	RegisterOp         = format.RegisterOp
	RegisterRendezvous = format.RegisterRendezvous
	StepsCarried       = format.StepsCarried
	StepsIndependent   = format.StepsIndependent
	SyncDevice         = format.SyncDevice
)

var (
	DefaultConfig = format.DefaultConfig
	ErrInvalid    = format.ErrInvalid
	LoadSpec      = format.LoadSpec
	MarshalSpec   = format.MarshalSpec
	ParseExpr     = format.ParseExpr
	ParseSpec     = format.ParseSpec
)
