package ir

// The prompt template checker: a model target's prompt is a text/template
// rendered with each case's dataset.PromptData (runtime/eval/dataset, the
// one statement of its fields); vet parses it and walks its parse tree
// against PromptData's fields, so that a misspelt field fails
// at vet time rather than mid-eval. It lives apart from check.go, the
// cross-reference checks, because it is a type checker of its own.

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/aidgen/aid/runtime/eval/dataset"
)

// checkPrompt parses a prompt template and checks its structure against
// PromptData, so a misspelt field fails here rather than mid-eval. It does
// not execute the template: the keys of .Metadata belong to each case, and
// there is no case at vet time. Expected is deliberately absent from
// PromptData: a prompt must not leak the answer.
func checkPrompt(prompt string) error {
	tmpl, err := template.New("prompt").Parse(prompt)
	if err != nil {
		return fmt.Errorf("invalid prompt template: %w", err)
	}
	root := reflect.TypeFor[dataset.PromptData]()
	for _, t := range tmpl.Templates() {
		if t.Tree == nil || t.Tree.Root == nil {
			continue
		}
		// A {{define}}d template is rendered with whatever dot its caller
		// passes, so only $ is known inside it.
		var dot reflect.Type
		if t.Name() == tmpl.Name() {
			dot = root
		}
		pc := promptChecker{tree: t.Tree, root: root}
		if err := pc.walk(t.Tree.Root, dot); err != nil {
			return fmt.Errorf("invalid prompt template: %w", err)
		}
	}
	return nil
}

// promptChecker walks a template's parse tree, tracking the type of dot
// (nil where it cannot be known, such as inside a value of .Metadata).
type promptChecker struct {
	tree *parse.Tree
	root reflect.Type
}

func (pc promptChecker) walk(n parse.Node, dot reflect.Type) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := pc.walk(c, dot); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		_, err := pc.pipe(n.Pipe, dot)
		return err
	case *parse.TemplateNode:
		_, err := pc.pipe(n.Pipe, dot)
		return err
	case *parse.IfNode:
		return pc.branch(&n.BranchNode, dot, func(reflect.Type) reflect.Type { return dot })
	case *parse.WithNode:
		return pc.branch(&n.BranchNode, dot, func(t reflect.Type) reflect.Type { return t })
	case *parse.RangeNode:
		return pc.branch(&n.BranchNode, dot, func(t reflect.Type) reflect.Type {
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
				return t.Elem()
			}
			return nil
		})
	}
	return nil
}

// branch checks an if, with or range: its pipeline, its body with the dot
// inner derives from the pipeline's type, and its else with the outer dot.
func (pc promptChecker) branch(b *parse.BranchNode, dot reflect.Type, inner func(reflect.Type) reflect.Type) error {
	t, err := pc.pipe(b.Pipe, dot)
	if err != nil {
		return err
	}
	if err := pc.walk(b.List, inner(t)); err != nil {
		return err
	}
	return pc.walk(b.ElseList, dot)
}

// pipe checks every field reference of a pipeline and returns the type of
// its value when that is a plain reference, nil otherwise.
func (pc promptChecker) pipe(p *parse.PipeNode, dot reflect.Type) (reflect.Type, error) {
	if p == nil {
		return nil, nil
	}
	var last reflect.Type
	for _, cmd := range p.Cmds {
		last = nil
		for _, arg := range cmd.Args {
			t, err := pc.arg(arg, dot)
			if err != nil {
				return nil, err
			}
			if len(cmd.Args) == 1 {
				last = t
			}
		}
	}
	if len(p.Cmds) != 1 {
		return nil, nil
	}
	return last, nil
}

func (pc promptChecker) arg(n parse.Node, dot reflect.Type) (reflect.Type, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.FieldNode:
		return pc.fields(n, dot, ".", n.Ident)
	case *parse.VariableNode:
		if n.Ident[0] != "$" {
			return nil, nil // a variable's type is not tracked
		}
		return pc.fields(n, pc.root, "$", n.Ident[1:])
	case *parse.ChainNode:
		t, err := pc.arg(n.Node, dot)
		if err != nil {
			return nil, err
		}
		return pc.fields(n, t, "("+n.Node.String()+")", n.Field)
	case *parse.PipeNode:
		return pc.pipe(n, dot)
	}
	return nil, nil
}

// fields follows a chain of field names from a value of type t (written
// as from), refusing a name the type cannot have.
func (pc promptChecker) fields(n parse.Node, t reflect.Type, from string, names []string) (reflect.Type, error) {
	for _, name := range names {
		if t == nil {
			return nil, nil
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := t.FieldByName(name)
			if !ok || !f.IsExported() {
				loc, _ := pc.tree.ErrorContext(n)
				whose := describeDot(from)
				if t == pc.root {
					whose = "the case"
				}
				msg := fmt.Sprintf("%s: %s has no field .%s", loc, whose, name)
				if s := suggest(name, fieldNames(t)); s != "" {
					msg += fmt.Sprintf(" (did you mean .%s?)", s)
				}
				if t == pc.root {
					msg += "; a prompt sees ." + strings.Join(fieldNames(t), ", .") + ", never the expected answer"
				}
				return nil, errors.New(msg)
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem() // any key may be in a case
			if t.Kind() == reflect.Interface {
				return nil, nil
			}
		case reflect.Interface:
			return nil, nil
		default:
			loc, _ := pc.tree.ErrorContext(n)
			return nil, fmt.Errorf("%s: %s is %s, which has no field .%s", loc, describeDot(from), kindWords(t), name)
		}
		if from == "." || from == "$" {
			from += name
		} else {
			from += "." + name
		}
	}
	return t, nil
}

// describeDot names the value a field was looked up on.
func describeDot(from string) string {
	if from == "." {
		return "dot"
	}
	return from
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		out = append(out, t.Field(i).Name)
	}
	return out
}

func kindWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a " + t.String()
}
