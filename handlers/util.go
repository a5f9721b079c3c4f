package handlers

import (
	"bytes"
	"context"
	"io"
	"strconv"
)

type (
	contextT = context.Context
	writerT  = io.Writer
)

func itoa(v int) string { return strconv.Itoa(v) }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
