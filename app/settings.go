package app

import (
	"context"

	"switchyard/services"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// SettingsDocs are the two settings documents (40-admin-api §2, §2.5) and
// their feature flags (§9), as the server wires them.
type SettingsDocs struct {
	Resilience *resilience.SettingsService
	General    *settings.Document[settings.General]
	Flags      *settings.Flags
}

// OpenSettings loads both documents from store; opts.Getenv is read once,
// here. The general document shares opts' environment, logger, provider
// lookup and change feed.
func OpenSettings(ctx context.Context, store services.SettingsStore, opts resilience.SettingsOptions) (SettingsDocs, error) {
	res, err := resilience.NewSettingsService(ctx, store, opts)
	if err != nil {
		return SettingsDocs{}, err
	}
	gen, err := settings.OpenGeneral(ctx, store, settings.GeneralOptions{KnownProvider: opts.KnownProvider,
		Getenv: opts.Getenv, Logger: opts.Logger})
	if err != nil {
		return SettingsDocs{}, err
	}
	if opts.Feed != nil {
		gen.Follow(opts.Feed)
	}
	flags := settings.NewFlags(res.Flags(), settings.FlagsOf(gen, settings.GeneralFlags))
	return SettingsDocs{Resilience: res, General: gen, Flags: flags}, nil
}

// wireSettings opens the settings documents.
func (s *Server) wireSettings(ctx context.Context) error {
	docs, err := OpenSettings(ctx, s.settings, resilience.SettingsOptions{
		Getenv:        s.cfg.Getenv,
		Logger:        s.log.With("component", "settings"),
		KnownProvider: func(id string) bool { _, ok := s.catalogue.Get().Get(id); return ok },
		ResolveTarget: s.resolveTarget,
		Feed:          s.feed,
	})
	if err != nil {
		return err
	}
	s.settingDocs, s.settingsSvc = docs, docs.Resilience
	return nil
}
