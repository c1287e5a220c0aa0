package pool

// For the external tests' TestMain, which runs the take helper.
var (
	TakeHelper    = takeHelper
	TakeHelperEnv = helperEnv
)
