package obs

import "os"

var osRemove = os.Remove
