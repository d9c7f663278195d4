# Installs ktesiod as a Windows service: automatic start, restart on failure (recovery actions),
# the daemon's state under %ProgramData%\ktesio. Run from an elevated PowerShell:
#   .\install-service.ps1 -Binary 'C:\Program Files\ktesio\ktesiod.exe'
# Undo with uninstall-service.ps1. See README.md for what is and is not tested.
[CmdletBinding()]
param(
  [Parameter(Mandatory = $true)][string]$Binary,
  [string]$StateDir = (Join-Path $env:ProgramData 'ktesio'),
  [string]$Name = 'ktesiod'
)
$ErrorActionPreference = 'Stop'

if (-not (Test-Path -LiteralPath $Binary -PathType Leaf)) {
  throw "ktesiod binary not found: $Binary"
}
if (Get-Service -Name $Name -ErrorAction SilentlyContinue) {
  throw "a service named '$Name' already exists; run uninstall-service.ps1 first"
}
New-Item -ItemType Directory -Force -Path $StateDir | Out-Null
# Only SYSTEM and Administrators may read the state (secrets.toml lives there).
icacls $StateDir /inheritance:r /grant:r 'SYSTEM:(OI)(CI)F' 'Administrators:(OI)(CI)F' | Out-Null

$socket = Join-Path $StateDir 'ktesiod.sock'
$command = "`"$Binary`" --state-dir `"$StateDir`" --socket `"$socket`""
New-Service -Name $Name -BinaryPathName $command -DisplayName 'Ktesio agent supervisor' `
  -Description 'Runs AI agents as services: supervision, metering, budgets (ktesio.v1 API).' `
  -StartupType Automatic | Out-Null

# Recovery: restart after 1 s, 5 s, then 30 s; the failure count resets after a day. The
# failure flag makes a stop with a non-zero exit code (ERROR_SERVICE_SPECIFIC_ERROR) count too,
# not only a crash.
sc.exe failure $Name reset= 86400 actions= restart/1000/restart/5000/restart/30000 | Out-Null
if ($LASTEXITCODE -ne 0) { throw "sc.exe failure returned $LASTEXITCODE" }
sc.exe failureflag $Name 1 | Out-Null
if ($LASTEXITCODE -ne 0) { throw "sc.exe failureflag returned $LASTEXITCODE" }
# The daemon drains for up to 30 s on stop (it asks the SCM for that wait hint).
sc.exe config $Name start= delayed-auto | Out-Null

Start-Service -Name $Name
Write-Host "installed and started service '$Name' ($command)"
