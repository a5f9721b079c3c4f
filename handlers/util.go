package handlers

import (
	"context"
	"io"
	"strconv"
)

type (
	contextT = context.Context
	writerT  = io.Writer
)

func itoa(v int) string { return strconv.Itoa(v) }
