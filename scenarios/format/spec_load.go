package format

import "github.com/collsim/collsim/ranks"

// OpLoad is a program kernel's load on its GPU (ranks/share.go): what its
// grid and its bytes ask of the GPU it shares with other streams' kernels.
// It comes from the kernel's time: gemm(m, k, n) is a decode GEMM's grid
// and bytes (ranks.Share.GEMMLoad), mem(bytes) an elementwise kernel's
// over bytes/4 elements (a bf16 read and write each); a sum of calls
// wants the largest grid and moves every call's bytes, n·call moves n
// times the bytes. A kernel without a time moves the bytes it reads and
// writes, as an elementwise kernel; one with a fixed time takes no share
// (nothing says what it asks of the GPU).
func (s *Spec) OpLoad(op *OpSpec, cfg Config, hw ranks.Profile, moved int64) ranks.Load {
	sh := hw.Share()
	switch {
	case op.TimeExpr != nil:
		l, _ := exprLoad(op.TimeExpr.root, exprEnv{cfg: &cfg, params: s.Params, hw: &hw}, sh)
		return l
	case op.TimeNs > 0:
		return ranks.Load{}
	}
	return sh.EltLoad(moved/4, moved)
}

// exprLoad is the load of n, and whether n calls gemm or mem at all.
func exprLoad(n *exprNode, env exprEnv, sh *ranks.Share) (ranks.Load, bool) {
	switch n.op {
	case 'n', 'v':
		return ranks.Load{}, false
	case 'f':
		var a [4]int64
		for i, x := range n.args {
			v, err := x.eval(env)
			if err != nil {
				return ranks.Load{}, false
			}
			a[i] = v
		}
		switch n.name {
		case "gemm":
			return sh.GEMMLoad(a[0], a[1], a[2]), true
		case "elt":
			return sh.EltLoad(a[0], a[1]), true
		case "moe":
			l := ranks.Load{}
			for _, p := range moeParts(env.hw, a) {
				l.SMs = max(l.SMs, p.SMs)
			}
			return l, true
		}
		return sh.EltLoad(a[0]/4, a[0]), true
	}
	l, lc := exprLoad(n.args[0], env, sh)
	r, rc := exprLoad(n.args[1], env, sh)
	if n.op == '*' && lc != rc {
		// a count times a call: the call's grid, its bytes that many times
		call, count := r, n.args[0]
		if lc {
			call, count = l, n.args[1]
		}
		k, err := count.eval(env)
		if err != nil || k < 0 {
			return call, true
		}
		return ranks.Load{SMs: call.SMs, Bytes: call.Bytes * k}, true
	}
	return ranks.Load{SMs: max(l.SMs, r.SMs), Bytes: l.Bytes + r.Bytes}, lc || rc
}
