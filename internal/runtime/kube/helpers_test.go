package kube_test

import (
	"bufio"
	"bytes"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }
