package embeddedetcd

import (
	"errors"
	"slices"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// newLogger is a zap logger for etcd's server and client libraries that
// writes the records at level or above through logger, so that they take
// the format (--logging-format text or json) and the stream of the
// process's other logs. The records carry the name "etcd".
func newLogger(logger logr.Logger, level zapcore.Level) *zap.Logger {
	return zap.New(logrCore{LevelEnabler: level, logger: logger.WithName("etcd")}, zap.AddCaller())
}

// logrCore is a zapcore.Core writing to a logr.Logger. Warnings, which
// logr has not, are info records; errors and worse are error records.
type logrCore struct {
	zapcore.LevelEnabler
	logger logr.Logger
	fields []zapcore.Field
}

func (c logrCore) With(fields []zapcore.Field) zapcore.Core {
	c.fields = append(slices.Clip(c.fields), fields...)
	return c
}

func (c logrCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c logrCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	var kvs []any
	if e.Caller.Defined {
		kvs = append(kvs, "etcdCaller", e.Caller.TrimmedPath())
	}
	var err error
	for _, f := range append(slices.Clip(c.fields), fields...) {
		if f.Type == zapcore.ErrorType && f.Key == "error" && err == nil {
			err, _ = f.Interface.(error)
			continue
		}
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for k, v := range enc.Fields {
			kvs = append(kvs, k, v)
		}
	}
	if e.Level < zapcore.ErrorLevel {
		if err != nil {
			kvs = append(kvs, "err", err)
		}
		c.logger.Info(e.Message, kvs...)
		return nil
	}
	if err == nil {
		err = errors.New(e.Message)
	}
	c.logger.Error(err, e.Message, kvs...)
	return nil
}

func (logrCore) Sync() error {
	klog.Flush()
	return nil
}
