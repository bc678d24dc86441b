package scenarios

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/collsim/collsim/scenarios/forms"
)

// ErrNotExpressible is returned by [ExportYAML] for a scenario built by Go
// code that the file format cannot describe.
var ErrNotExpressible = errors.New("not expressible as a scenario file")

// ExportYAML writes sc as a scenario file. Loading the result gives the same
// verdicts and trace hashes. It works for scenarios loaded from files and
// for Go built-ins whose Build is [BuildMoE]; for any other Go builder it
// returns an error wrapping [ErrNotExpressible].
func ExportYAML(sc *Scenario) ([]byte, error) {
	spec, err := SpecOf(sc)
	if err != nil {
		return nil, err
	}
	return MarshalSpec(spec), nil
}

// SpecOf returns the file form of sc (see [ExportYAML]).
func SpecOf(sc *Scenario) (*Spec, error) {
	if sc.Spec != nil {
		s := *sc.Spec
		s.Name, s.Description, s.Base = sc.Name, sc.Description, sc.Base
		s.Variants = append([]Variant(nil), sc.Variants...)
		s.Compare = append([]Comparison(nil), sc.Compare...)
		return &s, nil
	}
	if sc.Build != nil && reflect.ValueOf(sc.Build).Pointer() == reflect.ValueOf(forms.BuildMoE).Pointer() {
		return &Spec{Name: sc.Name, Description: sc.Description, Base: sc.Base, Graph: &GraphSpec{Builder: "moe"},
			Variants: append([]Variant(nil), sc.Variants...), Compare: append([]Comparison(nil), sc.Compare...)}, nil
	}
	return nil, fmt.Errorf("scenario %q: its Go builder has no scenario-file form: %w", sc.Name, ErrNotExpressible)
}
